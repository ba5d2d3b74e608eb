# torch.distributed tracing (issue 10): torch's CPU build in the venv, for the
# tests (tests/torch: 4 gloo ranks) and the benchmark.
#
# Only `pip install torch==2.13.0`: on this project's machines that pin takes
# the CPU wheel (2.13.0+cpu); a looser spec can resolve to a CUDA build that
# pulls gigabytes of nvidia-* packages, so the step refuses to finish if any
# appears. torch is deliberately not in EXTRAS: the [torch] extra's range
# (pyproject) is for users, and resolving it here could pick another build.

INSTALL_DEPS += $(wildcard native/opcall/*.c native/opcall/*.h)

TORCH_PIN ?= torch==2.13.0
TORCH_STAMP := $(VENV)/.torch-installed

TEST_STEPS += torch-install
BENCH_STEPS += bench-torch bench-torch-compute bench-torch-ops

.PHONY: torch-install bench-torch-compute bench-torch-ops

$(TORCH_STAMP): $(STAMP) mk/torch.mk
	$(PY) -m pip install -q --disable-pip-version-check '$(TORCH_PIN)'
	@if $(PY) -m pip list --disable-pip-version-check 2>/dev/null | grep -i '^nvidia-'; then \
	  echo "torch: CUDA packages were installed (above); only the CPU build belongs here" >&2; exit 1; fi
	touch $@

torch-install: $(TORCH_STAMP)

# mypy reads torch's types, and pytest runs tests/torch: both need it first.
typecheck pytest: $(TORCH_STAMP)

bench-torch: $(TORCH_STAMP)
	$(PY) benchmarks/bench_torch.py $(BENCH_TORCH_ARGS)

# trace_compute()'s forward/backward/optimizer.step spans against a bare SDK span (issue 21).
bench-torch-compute: $(TORCH_STAMP)
	$(PY) benchmarks/bench_torch_compute.py $(BENCH_TORCH_COMPUTE_ARGS)

# One rank's CPU per traced op (op records, ring, export) against a bare SDK span (issue 23).
bench-torch-ops: $(TORCH_STAMP)
	$(PY) benchmarks/bench_torch_ops.py $(BENCH_TORCH_OPS_ARGS)
