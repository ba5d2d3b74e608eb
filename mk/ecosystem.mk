# Ecosystem (issue 14): zero-code use, chrony-derived CPU bounds, packaging.
#
#   EXTRAS otlp          the OTLP HTTP exporter, resolved together with our pins, so
#                        the OTEL_TRACES_EXPORTER=otlp tests run
#   ecosystem-chrony     chronyd (Debian's chrony) for the two-namespace chrony tests
#                        (tests/ecosystem/test_ecosystem_chrony_live.py) and `ip`
#   ecosystem-pip-check  `pip check`: no installed package's pins are broken

EXTRAS += otlp
TEST_STEPS += ecosystem-chrony ecosystem-pip-check

.PHONY: ecosystem-chrony ecosystem-pip-check

# Install what is missing, only as root (CI runs as root on a fresh machine);
# elsewhere the chrony tests skip with a reason. The tests run their own chronyd
# with -x (never touching the clock) in network namespaces; the package's own
# service must not start and discipline this machine's clock, so while apt runs a
# policy-rc.d forbids starting services (unless the machine already has one).
POLICY_RC_D ?= /usr/sbin/policy-rc.d
SBIN_CHRONYD ?= /usr/sbin/chronyd

ecosystem-chrony:
	@pkgs=""; \
	command -v chronyd >/dev/null 2>&1 || [ -x $(SBIN_CHRONYD) ] || pkgs=" chrony"; \
	command -v ip >/dev/null 2>&1 || pkgs="$$pkgs iproute2"; \
	if [ -z "$$pkgs" ]; then :; \
	elif [ "$$(id -u)" != 0 ]; then echo "ecosystem: not root, the chronyd tests will skip (missing:$$pkgs)"; \
	elif command -v apt-get >/dev/null 2>&1; then \
		echo "ecosystem: installing$$pkgs (the chrony service is not started)"; \
		policy=$(POLICY_RC_D); ours=""; \
		if [ ! -e $$policy ]; then printf '#!/bin/sh\nexit 101\n' > $$policy && chmod 755 $$policy && ours=1; fi; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$pkgs >/dev/null; } \
			|| echo "ecosystem: could not install$$pkgs; the chronyd tests will skip"; \
		if [ -n "$$ours" ]; then rm -f $$policy; fi; \
	else echo "ecosystem: no apt-get; the chronyd tests will skip (missing:$$pkgs)"; fi

ecosystem-pip-check: venv
	$(PY) -m pip check --disable-pip-version-check

BENCH_STEPS += bench-chrony

bench-chrony: venv
	$(PY) benchmarks/bench_chrony.py
