# The demo (issue 6): `make demo` sets everything up (venv, install incl. the
# native build) through the Makefile's `venv` target, then runs it.
# Pass options with DEMO_ARGS, e.g. `make demo DEMO_ARGS="--ranks 6 --iterations 5"`.

DEMO_ARGS ?=

.PHONY: demo

demo: venv
	$(VENV)/bin/tempotrace demo $(DEMO_ARGS)
