"""TempoTrace SDK: trace context whose timestamps say how far they can be trusted.

The wire contract (``TTExt``, ``Sketch``, ``LamportClock``) and the errors are
imported eagerly and need neither OpenTelemetry nor the native clock module.
The clock, OpenTelemetry and analysis names below are loaded on first use
(PEP 562), so ``import tempotrace_sdk`` stays cheap and sans-IO.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_attributes
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

#: Public names served lazily: name -> module that defines it.
_LAZY = {
    # clocks (spec/clocks.md)
    "select_clock": ".clocks",
    "preflight": ".clocks",
    "survey": ".clocks",
    "PreflightResult": ".clocks",
    "CpuClock": ".clocks",
    "PhcClock": ".clocks",
    "CalibratedClock": ".clocks",
    # OpenTelemetry integration (spec/semantic-conventions.md)
    "configure": ".otel",
    "traced": ".otel",
    "span": ".otel",
    "TempoTracePropagator": ".otel",
    "TempoTraceSpanProcessor": ".otel",
    "Policy": ".otel",
    "load_policy": ".otel",
    "rejection_counts": ".otel",
    # analysis (spec/analysis.md)
    "analyze_file": ".analysis",
    "analyze_spans": ".analysis",
    "AnalysisReport": ".analysis",
    "Decision": ".analysis",
    "decide": ".analysis",
    "write_json": ".analysis",
    "write_perfetto": ".analysis",
    "write_html": ".analysis",
    "TraceFileError": ".analysis",
}

if TYPE_CHECKING:
    from .analysis import (
        AnalysisReport,
        Decision,
        TraceFileError,
        analyze_file,
        analyze_spans,
        decide,
        write_html,
        write_json,
        write_perfetto,
    )
    from .clocks import CalibratedClock, CpuClock, PhcClock, PreflightResult, preflight, select_clock, survey
    from .otel import (
        Policy,
        TempoTracePropagator,
        TempoTraceSpanProcessor,
        load_policy,
        rejection_counts,
        span,
        traced,
    )
    from .otel.configure import configure


__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)


__all__ = [
    "AnalysisReport",
    "CalibratedClock",
    "ClockError",
    "ClockQuality",
    "ClockSource",
    "CpuClock",
    "Decision",
    "FieldError",
    "HeaderError",
    "LamportClock",
    "LengthError",
    "PhcClock",
    "Policy",
    "PolicyError",
    "PreflightResult",
    "Sketch",
    "TTExt",
    "TempoTraceError",
    "TempoTracePropagator",
    "TempoTraceSpanProcessor",
    "TextFormError",
    "Timestamp",
    "TraceFileError",
    "TsSource",
    "VersionError",
    "__version__",
    "analyze_file",
    "analyze_spans",
    "configure",
    "decide",
    "load_policy",
    "preflight",
    "rejection_counts",
    "select_clock",
    "span",
    "survey",
    "traced",
    "write_html",
    "write_json",
    "write_perfetto",
]
