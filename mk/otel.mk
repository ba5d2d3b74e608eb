# OpenTelemetry layer (issue 4): the propagator/processor benchmark.
# Its tests (tests/otel) run in the ordinary pytest step; they start their
# own localhost HTTP processes and need nothing installed beyond the venv.

BENCH_STEPS += bench-otel

bench-otel: venv
	$(PY) -m benchmarks.bench_otel
