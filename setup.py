"""Build hook for the native PHC module; all metadata lives in pyproject.toml.

setuptools runs cffi's builder (native/build_phc.py) during ``pip install .``
and ``pip install -e .``, compiling ``tempotrace_sdk._phc``. The module is
Linux-only (PTP ioctls, adjtimex); elsewhere the package installs without it
and uses the pure-Python CPU clock.
"""

import sys

from setuptools import setup

setup(cffi_modules=["native/build_phc.py:ffibuilder"] if sys.platform.startswith("linux") else [])
