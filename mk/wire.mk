# Wire layer (issue 2): lint the conformance vectors before pytest runs them,
# and benchmark the codec against same-run peers.

TEST_STEPS += vector-lint
BENCH_STEPS += bench-wire

# Schema, unique tcIds, counts, canonical JSON, and "the files are exactly
# what conformance/tools/generate.py writes" (conformance/README.md).
vector-lint: venv
	$(PY) conformance/tools/lint.py

bench-wire: venv
	$(PY) -m benchmarks.bench_wire
