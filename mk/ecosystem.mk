# Ecosystem (issue 14): zero-code use, chrony-derived CPU bounds, packaging.
#
#   EXTRAS otlp          the OTLP HTTP exporter, resolved together with our pins, so
#                        the OTEL_TRACES_EXPORTER=otlp tests run
#   ecosystem-chrony     chronyd and chronyc (Debian's chrony) for the two-namespace
#                        chrony tests (tests/ecosystem/test_ecosystem_chrony_live.py), and `ip`
#   ecosystem-pip-check  `pip check`: no installed package's pins are broken
#   bench-chrony         what chrony adds to the CPU clock (benchmarks/bench_chrony.py)

EXTRAS += otlp
TEST_STEPS += ecosystem-chrony ecosystem-pip-check
BENCH_STEPS += bench-chrony

.PHONY: ecosystem-chrony ecosystem-pip-check bench-chrony

# chronyd as installed (PATH, /usr/sbin), else Debian's package unpacked here.
SBIN_CHRONYD ?= /usr/sbin/chronyd
CHRONY_DIR ?= native/build/chrony

# Only as root (CI runs as root on a fresh machine); elsewhere the chrony tests skip
# with a reason. The package is unpacked, not installed: installing it would remove
# the machine's own time daemon (chrony Conflicts: systemd-timesyncd, ntpsec, openntpd)
# and leave its clock undisciplined, and could start a chronyd that steers the clock.
# Only chrony's shared libraries are installed (they conflict with nothing). The tests
# run that chronyd with -x (never touching the clock) in network namespaces.
ecosystem-chrony:
	@if command -v chronyd >/dev/null 2>&1 || [ -x $(SBIN_CHRONYD) ] || [ -x $(CHRONY_DIR)/usr/sbin/chronyd ]; then :; \
	elif [ "$$(id -u)" != 0 ]; then echo "ecosystem: not root, the chronyd tests will skip (no chronyd)"; \
	elif ! command -v apt-get >/dev/null 2>&1; then echo "ecosystem: no apt-get; the chronyd tests will skip (no chronyd)"; \
	else \
		echo "ecosystem: unpacking Debian's chrony into $(CHRONY_DIR) (not installed: it would replace this machine's time daemon)"; \
		work=$$(mktemp -d); \
		{ apt-get update -qq \
		  && libs=$$(apt-cache depends chrony | awk '$$1 == "Depends:" && $$2 ~ /^lib/ {print $$2}') \
		  && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$libs >/dev/null \
		  && (cd $$work && apt-get download -qq chrony 2>/dev/null) \
		  && mkdir -p $(CHRONY_DIR) && dpkg-deb -x $$work/chrony_*.deb $(CHRONY_DIR); } \
			|| echo "ecosystem: could not unpack chrony; the chronyd tests will skip"; \
		rm -rf $$work; \
	fi
	@if command -v ip >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "ecosystem: installing iproute2"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null; } \
			|| echo "ecosystem: could not install iproute2; the chronyd tests will skip"; \
	else echo "ecosystem: no 'ip' (iproute2); the chronyd tests will skip"; fi

ecosystem-pip-check: venv
	$(PY) -m pip check --disable-pip-version-check

bench-chrony: venv
	$(PY) benchmarks/bench_chrony.py
