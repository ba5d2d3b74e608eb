"""cffi (API mode) builder for the native module ``tempotrace_sdk._phc``.

Lives outside the import package and is hooked from setup.py through
``cffi_modules`` (the pyca/cryptography layout). The cdef is not retyped
here: it is the text between the ``cdef-begin``/``cdef-end`` markers of the
hand-written headers, so a header and its binding cannot drift apart.

Two concerns share the one module: the PHC and kernel-clock reads
(native/phc/) and the per-event stamp of the OpenTelemetry layer
(native/stamp/), which hashes span ids with the C reference codec's
MurmurHash3 (native/ttext/murmur3.c, compiled in as it is). A third, small
one reads the ``tempotrace.stamps`` text with the C reference decoder
(native/ttext/stamps.c, likewise) for the span table's writer.
"""

from __future__ import annotations

import pathlib
import re

from cffi import FFI

HERE = pathlib.Path(__file__).resolve().parent
PHC = HERE / "phc"
STAMP = HERE / "stamp"
TTEXT = HERE / "ttext"
# (directory, unit) in cdef order: a header's types come before their users.
UNITS = (
    (PHC, "tt_phc_abi"),
    (PHC, "tt_clock"),
    (PHC, "tt_ntp"),
    (PHC, "tt_phc_open"),
    (PHC, "tt_sysoff"),
    (STAMP, "tt_stamp"),
    (STAMP, "tt_stamps_read"),
)
#: Compiled in, not bound: the sketch hash the stamp shares with the C codec, and the C codec's stamps text
#: decoder that tt_stamps_read wraps.
HELPERS = ((TTEXT, "murmur3"), (TTEXT, "stamps"))

_CDEF = re.compile(r"/\* cdef-begin \*/(.*?)/\* cdef-end \*/", re.S)


def _cdef_of(header: pathlib.Path) -> str:
    blocks = _CDEF.findall(header.read_text())
    if not blocks:
        raise RuntimeError(f"{header}: no cdef-begin/cdef-end block")
    return "\n".join(blocks)


def _rel(path: pathlib.Path) -> str:
    return str(path.relative_to(HERE.parent))


ffibuilder = FFI()
ffibuilder.cdef("\n".join(_cdef_of(folder / f"{unit}.h") for folder, unit in UNITS))
ffibuilder.set_source(
    "tempotrace_sdk._phc",
    "\n".join(f'#include "{unit}.h"' for _, unit in UNITS),
    sources=[_rel(folder / f"{unit}.c") for folder, unit in (*UNITS, *HELPERS)],
    include_dirs=sorted({_rel(folder) for folder, _ in (*UNITS, *HELPERS)}),
    extra_compile_args=["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
