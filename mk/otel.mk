# OpenTelemetry layer (issues 4, 12): the propagator/processor benchmarks, and
# the SDK matrix. Its tests (tests/otel) run in the ordinary pytest step; they
# start their own localhost HTTP processes and need nothing beyond the venv.
#
# otel-sdk-matrix: the OTel tests again against the oldest supported SDK
# (1.40.0, pyproject's floor) and the newest release, each installed with
# `pip install --target` into a throwaway .venv-otel-<v>/site that is put in
# front of the venv's own SDK through PYTHONPATH (subprocesses inherit it).
# TEMPOTRACE_EXPECT_SDK_FAST_PATH=1 makes tests/otel/test_otel_sdk_internals.py
# assert that otel/sdk_internals.py found every internal it uses on that SDK
# (the fast path taken), not just that the public fallback works.

BENCH_STEPS += bench-otel bench-attributes
TEST_STEPS += otel-sdk-matrix

OTEL_SDK_MATRIX ?= 1.40.0 latest

.PHONY: otel-sdk-matrix

otel-sdk-matrix: venv
	@for v in $(OTEL_SDK_MATRIX); do \
	  dir=.venv-otel-$$v/site; spec="opentelemetry-sdk==$$v"; mkdir -p $$dir; \
	  if [ "$$v" = latest ]; then spec=opentelemetry-sdk; fi; \
	  $(PY) -m pip install -q --disable-pip-version-check --upgrade --target $$dir "$$spec" >$$dir.log 2>&1 \
	    || { cat $$dir.log; echo "otel: could not install $$spec" >&2; exit 1; }; \
	  got=$$(PYTHONPATH=$$dir $(PY) -c "import opentelemetry.sdk.version as v; print(v.__version__)"); \
	  echo "otel: tests/otel against opentelemetry-sdk $$got ($$v)"; \
	  PYTHONPATH=$$dir TEMPOTRACE_EXPECT_SDK_FAST_PATH=1 $(PY) -m pytest -q -p no:cacheprovider tests/otel \
	    || { echo "otel: tests failed on opentelemetry-sdk $$got" >&2; exit 1; }; \
	done

bench-otel: venv
	$(PY) -m benchmarks.bench_otel

bench-attributes: venv
	$(PY) -m benchmarks.bench_attributes
