"""The tt-ext v3 wire contract: header value, text form, SVC sketch, Lamport counter.

Sans-IO: nothing here reads a clock, touches a socket or imports OpenTelemetry.
"""

from .header import TTExt
from .lamport import LAMPORT_MAX_AHEAD, LamportClock
from .layout import (
    BINARY_HEADER,
    HEADER_LEN,
    TEXT_HEADER,
    TEXT_LEN,
    TRACESTATE_KEY,
    UNCERTAINTY_SATURATED,
    ClockQuality,
    TsSource,
)
from .sketch import Sketch, sketch_indices
from .text import decode_text, encode_text

__all__ = [
    "BINARY_HEADER",
    "HEADER_LEN",
    "LAMPORT_MAX_AHEAD",
    "TEXT_HEADER",
    "TEXT_LEN",
    "TRACESTATE_KEY",
    "UNCERTAINTY_SATURATED",
    "ClockQuality",
    "LamportClock",
    "Sketch",
    "TTExt",
    "TsSource",
    "decode_text",
    "encode_text",
    "sketch_indices",
]
