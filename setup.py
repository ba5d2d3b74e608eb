"""Build hook for the native modules; all metadata lives in pyproject.toml.

setuptools runs cffi's builder (native/build_phc.py) during ``pip install .``
and ``pip install -e .``, compiling ``tempotrace_sdk._phc``, and builds
``tempotrace_sdk._opcall`` (native/opcall/tt_opcall.c: a traced torch
collective's common case, a CPython extension because it calls torch and
Python objects without a Python frame; native/opcall/tt_opspans.c: ended
op records straight into OTLP JSON spans) and ``tempotrace_sdk._columns``
(native/columns/tt_attrs.c: spans' attribute arrays into columns, for the
columnar analysis). All are Linux-only, as the clocks are; elsewhere the
package installs without them and runs in Python.
"""

import sys

from setuptools import Extension, setup

LINUX = sys.platform.startswith("linux")
OPCALL = Extension(
    "tempotrace_sdk._opcall",
    sources=["native/opcall/tt_opcall.c", "native/opcall/tt_opspans.c"],
    extra_compile_args=["-std=gnu11", "-O2", "-Wall", "-Werror=implicit-function-declaration"],
)

COLUMNS = Extension(
    "tempotrace_sdk._columns",
    sources=["native/columns/tt_attrs.c", "native/columns/tt_stampfields.c", "native/columns/tt_ownsketch.c",
             "native/columns/tt_claimphysics.c", "native/columns/tt_readings.c", "native/columns/tt_replay.c",
             "native/columns/tt_skeleton.c", "native/ttext/ttext.c", "native/ttext/murmur3.c"],
    include_dirs=["native/ttext", "native/stamp"],
    extra_compile_args=["-std=gnu11", "-O2", "-Wall", "-Werror=implicit-function-declaration"],
)

setup(
    cffi_modules=["native/build_phc.py:ffibuilder"] if LINUX else [],
    ext_modules=[OPCALL, COLUMNS] if LINUX else [],
)
