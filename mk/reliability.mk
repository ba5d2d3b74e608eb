# Reliability (issue 13): the export benchmark (sustained spans/s per process,
# where the export queue starts to drop, what a queued span costs), from which
# the defaults in tempotrace_sdk/otel/batching.py are chosen. Its tests
# (tests/reliability, including the heavier `load`-marked variants) run in the
# ordinary pytest step; the full-disk and read-only cases mount a small tmpfs
# as root (CI) and skip elsewhere, so nothing needs installing.

BENCH_STEPS += bench-export

bench-export: venv
	$(PY) benchmarks/bench_export.py $(BENCH_EXPORT_ARGS)
