"""cffi (API mode) builder for the native PHC module ``tempotrace_sdk._phc``.

Lives outside the import package and is hooked from setup.py through
``cffi_modules`` (the pyca/cryptography layout). The cdef is not retyped
here: it is the text between the ``cdef-begin``/``cdef-end`` markers of the
hand-written headers in native/phc/, so a header and its binding cannot
drift apart.
"""

from __future__ import annotations

import pathlib
import re

from cffi import FFI

HERE = pathlib.Path(__file__).resolve().parent
PHC = HERE / "phc"
# Order matters only for the cdef: a header's types come before their users.
UNITS = ("tt_phc_abi", "tt_clock", "tt_ntp", "tt_phc_open", "tt_sysoff")

_CDEF = re.compile(r"/\* cdef-begin \*/(.*?)/\* cdef-end \*/", re.S)


def _cdef_of(header: pathlib.Path) -> str:
    blocks = _CDEF.findall(header.read_text())
    if not blocks:
        raise RuntimeError(f"{header}: no cdef-begin/cdef-end block")
    return "\n".join(blocks)


ffibuilder = FFI()
ffibuilder.cdef("\n".join(_cdef_of(PHC / f"{unit}.h") for unit in UNITS))
ffibuilder.set_source(
    "tempotrace_sdk._phc",
    "\n".join(f'#include "{unit}.h"' for unit in UNITS),
    sources=[str((PHC / f"{unit}.c").relative_to(HERE.parent)) for unit in UNITS],
    include_dirs=[str(PHC.relative_to(HERE.parent))],
    extra_compile_args=["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
