# The demo (issues 6, 10): `make demo` sets everything up (venv, install incl. the
# native build, torch's CPU build through mk/torch.mk's torch-install, never the
# CUDA wheels) and runs the torchrun training job; `tempotrace demo --http` is the
# HTTP imitation, which needs no torch.
# Pass options with DEMO_ARGS, e.g. `make demo DEMO_ARGS="--ranks 6 --steps 5"`.

DEMO_ARGS ?=

.PHONY: demo

# torch-install by name: mk/torch.mk (read after this file) defines it and its stamp.
demo: venv torch-install
	$(VENV)/bin/tempotrace demo $(DEMO_ARGS)
