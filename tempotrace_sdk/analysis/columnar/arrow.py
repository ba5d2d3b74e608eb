"""Arrow scalars made once: pyarrow converts a Python value to a scalar by trying imports (decimal, pandas,
dateutil) on every call, which costs more than the kernel it is passed to on a block of rows."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import pyarrow as pa

__all__ = ["scalar"]


@lru_cache(maxsize=512)
def _made(value: Any, _kind: type, type_: pa.DataType | None) -> pa.Scalar:
    return pa.scalar(value, type_)


def scalar(value: Any, type_: pa.DataType | None = None) -> pa.Scalar:
    """``pa.scalar(value, type_)``, kept (keyed by the value's class too: True and 1 are equal keys)."""
    return _made(value, value.__class__, type_)
