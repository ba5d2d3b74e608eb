# TempoTrace SDK. The two commands a new user needs:
#   make test   set up everything (venv, install incl. native build, system
#               packages such as linuxptp) and run every check
#   make demo   set up and run the multi-process demo
#
# Each layer adds its own steps in mk/<layer>.mk by appending to
#   EXTRAS       optional-dependency groups installed into the venv
#   INSTALL_DEPS files whose change forces a reinstall (e.g. native sources)
#   TEST_STEPS   targets run by `make test` before pytest
#   BENCH_STEPS  targets run by `make bench`
# so no two layers edit this file at once.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

EXTRAS := test analysis
INSTALL_DEPS := pyproject.toml $(wildcard setup.py)
TEST_STEPS :=
BENCH_STEPS :=

include $(sort $(wildcard mk/*.mk))

comma := ,
empty :=
space := $(empty) $(empty)
EXTRAS_SPEC := $(subst $(space),$(comma),$(sort $(strip $(EXTRAS))))

.PHONY: venv test lint typecheck pytest bench clean $(TEST_STEPS) $(BENCH_STEPS)

# A fresh Debian/Ubuntu machine may lack venv support, a C compiler or the
# Python headers (the install compiles the native PHC module with cffi).
# Install them only when missing, and only as root; say what is missing otherwise.
.PHONY: sysdeps
sysdeps:
	@missing=""; \
	$(PYTHON) -c "import ensurepip, venv" 2>/dev/null || missing="$$missing python3-venv"; \
	command -v gcc >/dev/null 2>&1 || missing="$$missing gcc libc6-dev"; \
	$(PYTHON) -c "import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" \
	  || missing="$$missing python3-dev"; \
	if [ -z "$$missing" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	else echo "missing system packages:$$missing (install them, then rerun)" >&2; exit 1; fi

$(STAMP): $(INSTALL_DEPS) | sysdeps
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[$(EXTRAS_SPEC)]'
	touch $@

venv: $(STAMP)

lint: venv
	$(VENV)/bin/ruff check tempotrace_sdk tests benchmarks conformance

typecheck: venv
	$(VENV)/bin/mypy

pytest: venv
	$(PY) -m pytest $(PYTEST_ARGS)

test: venv
	$(MAKE) --no-print-directory lint typecheck $(TEST_STEPS) pytest

bench: venv
	$(MAKE) --no-print-directory $(BENCH_STEPS)

# Everything a build, a test run or `make demo` leaves here (the demo writes ./tempotrace-demo-out).
clean:
	rm -rf $(VENV) build *.egg-info tempotrace_sdk/*.so .pytest_cache .mypy_cache .ruff_cache .hypothesis \
	  native/build tempotrace-demo-*/
