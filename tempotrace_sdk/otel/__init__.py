"""OpenTelemetry integration: the ``tempotrace`` propagator, span processor, decorators, configure().

Quick start::

    from tempotrace_sdk.otel import configure, traced
    configure(service_name="trainer")       # clock, processor, propagator, exporter

    @traced
    def step(batch): ...

Spans land as OTLP JSON lines in ``tempotrace-spans.jsonl`` (or
$TEMPOTRACE_EXPORT_PATH) with the ``tempotrace.*`` attributes of
spec/semantic-conventions.md.
"""

from .binary import binary_header, extract_binary, inject_binary
from .configure import TempoTraceHandle, configure
from .context import RemoteHop, TempoTraceState, get_state, remote_hop
from .decorators import span, traced
from .export import AppendStream
from .policy import Contract, Policy, load_policy
from .processor import TempoTraceSpanProcessor
from .propagator import TempoTracePropagator

__all__ = [
    "AppendStream",
    "Contract",
    "Policy",
    "RemoteHop",
    "TempoTraceHandle",
    "TempoTracePropagator",
    "TempoTraceSpanProcessor",
    "TempoTraceState",
    "binary_header",
    "configure",
    "extract_binary",
    "get_state",
    "inject_binary",
    "load_policy",
    "rejection_counts",
    "remote_hop",
    "span",
    "traced",
]


def rejection_counts() -> dict[str, int]:
    """Headers this process refused at extract (text and binary), by error class."""
    return get_state().rejections()
