# Clock layer (issue 3): native PHC module sources force a reinstall (the
# cffi build runs inside `pip install -e .`), linuxptp for the ptp4l tests,
# and the clock benchmark.

INSTALL_DEPS += native/build_phc.py $(wildcard native/phc/*.c native/phc/*.h native/stamp/*.c native/stamp/*.h) native/ttext/murmur3.c native/ttext/murmur3.h native/ttext/stamps.c native/ttext/stamps.h
TEST_STEPS += clocks-linuxptp
BENCH_STEPS += bench-clock

# The ptp4l integration tests need ptp4l/pmc (linuxptp) and `ip` (iproute2,
# for the namespaces and the veth pair; minimal images lack it). Install
# what is missing from Debian, only as root (CI runs as root on a fresh
# machine); elsewhere the tests skip with a reason, so this step stays quiet.
clocks-linuxptp:
	@pkgs=""; \
	command -v ptp4l >/dev/null 2>&1 || pkgs=" linuxptp"; \
	command -v ip >/dev/null 2>&1 || pkgs="$$pkgs iproute2"; \
	if [ -z "$$pkgs" ]; then :; \
	elif [ "$$(id -u)" != 0 ]; then echo "clocks: not root, ptp4l tests will skip (missing:$$pkgs)"; \
	elif command -v apt-get >/dev/null 2>&1; then \
		echo "clocks: installing$$pkgs"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$pkgs >/dev/null; \
	else echo "clocks: no apt-get; ptp4l tests will skip (missing:$$pkgs)"; fi

bench-clock: venv
	$(PY) benchmarks/bench_clock.py
