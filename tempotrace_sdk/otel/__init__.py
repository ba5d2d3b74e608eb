"""OpenTelemetry integration: the ``tempotrace`` propagator, span processor, decorators, configure().

Two processes, instrumented::

    # client.py                                   # server.py (http.server handler)
    from opentelemetry.propagate import inject     from opentelemetry.propagate import extract
    from tempotrace_sdk.otel import configure, traced
    handle = configure(service_name="client")      configure(service_name="server")
    @traced                                        def do_GET(self):
    def call():                                        ctx = extract(self.headers)
        headers = {}; inject(headers)                  with span("GET", kind=SpanKind.SERVER, context=ctx):
        urlopen(Request(URL, headers=headers))             ...
    call(); handle.shutdown()

``configure()`` installs the clock (TEMPOTRACE_CLOCK), the processor, the
global propagator (tracecontext + baggage + tempotrace, unless
OTEL_PROPAGATORS is set) and an exporter: OTLP JSON lines appended to
``tempotrace-spans.jsonl`` (``tempotrace-spans-<job>.jsonl`` in a job the
launcher names; TEMPOTRACE_EXPORT_PATH; one file may be shared by the
processes of one job) or one ``spans-<pid>.jsonl`` per process under
TEMPOTRACE_EXPORT_DIR; the standard OTLP variables send to a collector. See
``configure`` for every variable and spec/semantic-conventions.md for the
``tempotrace.*`` attributes.
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
