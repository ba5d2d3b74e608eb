"""TempoTrace SDK: trace context whose timestamps say how far they can be trusted.

The wire contract (``TTExt``, ``Sketch``, ``LamportClock``) is importable
without OpenTelemetry or the native clock module.
"""

from .clocks.base import ClockSource, Timestamp
from .errors import (
    ClockError,
    FieldError,
    HeaderError,
    LengthError,
    PolicyError,
    TempoTraceError,
    TextFormError,
    VersionError,
)
from .wire import ClockQuality, LamportClock, Sketch, TsSource, TTExt

__version__ = "0.1.0"

__all__ = [
    "ClockError",
    "ClockQuality",
    "ClockSource",
    "FieldError",
    "HeaderError",
    "LamportClock",
    "LengthError",
    "PolicyError",
    "Sketch",
    "TTExt",
    "TempoTraceError",
    "TextFormError",
    "Timestamp",
    "TsSource",
    "VersionError",
    "__version__",
]
