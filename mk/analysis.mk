# Causal analysis (issue 5): the HTML timeline is checked in headless Chromium
# (tests/analysis/test_analysis_html_chromium.py), so `make test` installs
# Debian's chromium when it is missing and we are root (CI runs as root on a
# fresh machine); elsewhere that test skips with a reason. The benchmarks
# measure `tempotrace analyze` against json.loads of the same lines, on
# demo-like and lighter spans, its memory, and the Dask engine's identity;
# and the analysis of one collective of n ranks (bench_collectives.py).

# The columnar decode's C pivot, stamp gather and own sketches (tempotrace_sdk._columns, with the C codec's
# sketch code from native/ttext) are built by the install.
INSTALL_DEPS += $(wildcard native/columns/*.c native/columns/*.h) native/ttext/ttext.c native/ttext/ttext.h \
	native/stamp/tt_stamps_read.h

# `--engine dask` is tested on a real distributed.LocalCluster: the [dask] extra is installed.
EXTRAS += dask
TEST_STEPS += analysis-chromium
BENCH_STEPS += bench-analysis bench-collectives

analysis-chromium:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" != 0 ]; then echo "analysis: not root, the Chromium HTML test will skip"; \
	elif command -v apt-get >/dev/null 2>&1; then \
		echo "analysis: installing chromium (headless HTML check)"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
		  || echo "analysis: could not install chromium (no such package here?); the Chromium HTML test will skip"; \
	else echo "analysis: no apt-get; the Chromium HTML test will skip"; fi

# 10^4 -> 10^6 spans (linear?), both span profiles, and the 10^6-span --engine dask identity: several
# minutes. `make bench BENCH_ANALYSIS_ARGS="--sizes 10000,100000"` for a quick look.
BENCH_ANALYSIS_ARGS ?= --sizes 10000,100000,1000000 --dask 1000000

bench-analysis: venv
	$(PY) benchmarks/bench_analysis.py $(BENCH_ANALYSIS_ARGS)

# One collective of n = 8 ... 4,096 ranks (issue 10): the analysis grows as n log n, against the claim
# decided pair by pair up to 512 ranks. A few seconds.
BENCH_COLLECTIVES_ARGS ?=

bench-collectives: venv
	$(PY) benchmarks/bench_collectives.py $(BENCH_COLLECTIVES_ARGS)
