"""``configure()``: one call installs clock, processor, propagator and exporter.

Every argument has an environment variable, read when the argument is None:

==============================  ==================================================
TEMPOTRACE_CLOCK                clock spec for ``select_clock`` (default ``auto``)
TEMPOTRACE_TENANT               local tenant id 0..15 (default 0)
TEMPOTRACE_HOST                 host name on spans (default: the real host name)
TEMPOTRACE_POLICY               path of a confidence policy TOML file
TEMPOTRACE_EXPORT_PATH          OTLP JSON-lines file, shared safely by processes
TEMPOTRACE_EXPORT_DIR           a directory: one ``spans-<pid>.jsonl`` per process
TEMPOTRACE_EXPORT_FORMAT        ``jsonl`` (default) or ``parquet``: Parquet parts in ``<path>.parquet.d``
TEMPOTRACE_EXPORT_SYNC          ``1``: export each span as it ends (no batching)
TEMPOTRACE_EXPORT_BLOCK_MS      longest wait for room in a full export queue (2000)
TEMPOTRACE_TRACESTATE_FALLBACK  ``1``: also carry the header in tracestate ``tt=``
RANK, WORLD_SIZE, LOCAL_RANK,   set by torchrun: spans carry ``tempotrace.rank`` and the
TEMPOTRACE_JOB_ID, ...          other launch facts (``tempotrace_sdk.launch``)
==============================  ==================================================

plus the standard OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_PROPAGATORS,
OTEL_TRACES_EXPORTER, OTEL_BSP_* and OTEL_EXPORTER_OTLP_* variables.

Export is built to lose nothing silently (spec/reliability.md): a full
queue waits briefly for the exporter, every dropped span is counted in
``handle.errors()``, SIGTERM and exit flush, and an export file that cannot
be opened is a warning, not a crash.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ..clocks.base import ClockSource
from .batching import block_millis_from_env
from .context import TempoTraceState, default_clock, env_host, env_tenant, get_state
from .export import export_processor, select_exporter
from .file_export import JsonLinesSpanExporter
from .lifecycle import EXIT_FLUSH_TIMEOUT_S, flush_each, install_exit_flush, release_held_within
from .policy import Policy
from .process import process_attributes
from .processor import TempoTraceSpanProcessor
from .propagator import TempoTracePropagator

__all__ = ["POLICY_ENV", "Settings", "TempoTraceHandle", "configure"]

_log = logging.getLogger(__name__)

POLICY_ENV = "TEMPOTRACE_POLICY"
SYNC_ENV = "TEMPOTRACE_EXPORT_SYNC"


@dataclass
class TempoTraceHandle:
    """What ``configure()`` installed; ``shutdown()`` flushes and stops it."""

    provider: TracerProvider
    processor: TempoTraceSpanProcessor
    export_processors: list[SpanProcessor]
    #: The OTLP JSON-lines file this process writes, or None (collector/none).
    export_path: str | None
    state: TempoTraceState
    _done: bool = field(default=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export every ended span now, every pipeline at once within ``timeout_millis``; False if one did not finish.

        A pipeline that hangs (a collector not answering) does not keep the others
        (the local file) from being flushed.
        """
        return flush_each(self.export_processors, timeout_millis / 1000)

    def errors(self) -> dict[str, int]:
        """Failures counted instead of raised, by kind: hook errors, and export loss
        (``export_dropped`` spans in all, ``export_dropped_<reason>``, ``export_write_failed``,
        ``export_open_failed``; spec/reliability.md §Where loss is counted)."""
        return self.state.errors()

    def shutdown(self) -> None:
        """Flush and stop our processors (idempotent). Spans started later carry no stamps."""
        with self._lock:
            if self._done:
                return
            self._done = True
        self.processor.shutdown()  # makes the held spans first (lifecycle.release_held_within)
        for p in self.export_processors:
            p.shutdown()


_current: TempoTraceHandle | None = None


def current_handle() -> TempoTraceHandle | None:
    """What the last ``configure()`` installed (None: never called); torch's op spans go to its export processors."""
    return _current


def configure(
    *,
    service_name: str | None = None,
    clock: ClockSource | str | None = None,
    tenant: int | None = None,
    host: str | None = None,
    policy: str | os.PathLike[str] | Policy | None = None,
    export_path: str | os.PathLike[str] | None = None,
    export_dir: str | os.PathLike[str] | None = None,
    exporter: SpanExporter | None = None,
    batch: bool | None = None,
    tracestate_fallback: bool | None = None,
    set_propagator: bool = True,
) -> TempoTraceHandle:
    """Install TempoTrace into this process's OpenTelemetry setup.

    Reuses the global SDK ``TracerProvider`` if one is set, else creates one
    (resource from ``service_name`` / OTEL_SERVICE_NAME). Adds the TempoTrace
    processor and an export processor (Batch, or Simple with ``batch=False``).
    Sets the global propagator to tracecontext + baggage + tempotrace unless
    OTEL_PROPAGATORS is set (then the SDK already built it from that list).
    Calling it again replaces the previous TempoTrace pipeline.

    Raises ValueError/PolicyError/ClockError for bad arguments or variables:
    configuration mistakes are loud; only the network path is silent. An
    export destination that cannot be used (a read-only or full file system)
    is not a mistake in the configuration: it is a warning and an
    ``errors()`` count, and the application runs on (spec/reliability.md).
    SIGTERM flushes ended spans first when this is called on the main thread.
    """
    global _current
    # Everything that can be wrong is found before anything changes: a configure()
    # that raises leaves the running pipeline, the state and the files as they were.
    settings = Settings.resolve(clock=clock, tenant=tenant, host=host, policy=policy)
    if batch is None:
        batch = os.environ.get(SYNC_ENV, "").strip().lower() not in ("1", "true", "yes", "on")
    block_millis = block_millis_from_env() if batch else None
    exporters, where = ([exporter], None) if exporter is not None else select_exporter(export_path, export_dir)
    export_processors = _build_export_processors(exporters, batch, block_millis)
    # Spans held to be made later (torch's, lifecycle) were read under the running configuration: they are made
    # under it, before the state changes (tenant, host, policy, clock).
    release_held_within(EXIT_FLUSH_TIMEOUT_S)
    state = settings.apply()  # only now: a configuration error above leaves the process as it was

    if _current is not None:
        _current.shutdown()
    provider = _provider(service_name, state)
    processor = TempoTraceSpanProcessor()
    provider.add_span_processor(processor)
    for export, exp in zip(export_processors, exporters, strict=True):
        if isinstance(exp, JsonLinesSpanExporter):
            exp.resource = provider.resource  # what its drop records carry
        provider.add_span_processor(export)
    install_exit_flush()

    if set_propagator:
        _install_propagator(tracestate_fallback)
    handle = TempoTraceHandle(
        provider, processor, export_processors, str(Path(where).resolve()) if where else None, state
    )
    _current = handle
    _log.debug("tempotrace configured: clock=%s tenant=%d export=%s", state.clock.name, state.tenant, where)
    return handle


@dataclass(frozen=True)
class Settings:
    """Clock, tenant, host and policy resolved from arguments, else their environment variables."""

    clock: ClockSource
    tenant: int
    host: str
    policy: Policy | None
    #: Under a launcher (RANK, WORLD_SIZE set): rank, world size, job ... (tempotrace_sdk/launch.py), else empty.
    launch: dict[str, int | str] = field(default_factory=dict)

    @classmethod
    def resolve(
        cls,
        *,
        clock: ClockSource | str | None = None,
        tenant: int | None = None,
        host: str | None = None,
        policy: str | os.PathLike[str] | Policy | None = None,
    ) -> Settings:
        """Raises what ``configure()`` documents for a bad argument or variable."""
        resolved_clock = clock if clock is not None and not isinstance(clock, str) else default_clock(clock)
        resolved_tenant = tenant if tenant is not None else env_tenant()
        if not isinstance(resolved_tenant, int) or isinstance(resolved_tenant, bool) or not 0 <= resolved_tenant <= 15:
            raise ValueError(f"tenant must be an integer 0..15, got {resolved_tenant!r}")
        source = policy if policy is not None else (os.environ.get(POLICY_ENV) or None)
        resolved_policy = source if isinstance(source, Policy) or source is None else Policy.load(source)
        # Every span says which rank it is (on the Resource, semantic-conventions §9.1). A malformed
        # RANK or WORLD_SIZE raises here, before anything changes. Never imports torch.
        from ..launch import launch_facts

        facts = launch_facts()
        return cls(resolved_clock, resolved_tenant, host if host is not None else env_host(), resolved_policy,
                   facts.attributes() if facts is not None else {})

    def apply(self) -> TempoTraceState:
        """Set them on the process's state (``get_state()``) and return it."""
        state = get_state()
        state.clock = self.clock
        state.tenant = self.tenant
        state.host = self.host
        state.policy = self.policy
        state.launch = self.launch
        return state




def _build_export_processors(
    exporters: list[SpanExporter], batch: bool, block_millis: int | None
) -> list[SpanProcessor]:
    """One export processor per exporter; on any failure every one built is stopped and every exporter shut
    (its file closed) before the error goes on."""
    built: list[SpanProcessor] = []
    try:
        for exp in exporters:
            built.append(export_processor(exp, batch=batch, block_millis=block_millis))
    except BaseException:
        for done in built:
            _quietly(done.shutdown)
        for exp in exporters[len(built) :]:
            _quietly(exp.shutdown)
        raise
    return built


def _quietly(stop: Callable[[], None]) -> None:
    try:
        stop()
    except Exception:
        _log.debug("tempotrace: stopping a half-built pipeline failed", exc_info=True)


def _provider(service_name: str | None, state: TempoTraceState) -> TracerProvider:
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current  # its Resource is fixed: the processor writes the per-process attributes on spans
    attributes: dict[str, Any] = {"service.name": service_name} if service_name else {}
    # What every span of this process shares goes on the Resource, once per exported batch (otel/process.py).
    attributes.update(process_attributes(state))
    provider = TracerProvider(resource=Resource.create(attributes))
    trace.set_tracer_provider(provider)
    installed = trace.get_tracer_provider()
    # set_tracer_provider refuses a second provider; use whichever won.
    return installed if isinstance(installed, TracerProvider) else provider


def _install_propagator(tracestate_fallback: bool | None) -> None:
    # Imported here: opentelemetry.propagate loads the entry points (ours
    # included) while it initialises, so importing it at module level would
    # be circular when OTEL_PROPAGATORS names tempotrace.
    from opentelemetry.propagate import get_global_textmap, set_global_textmap

    configured = os.environ.get("OTEL_PROPAGATORS")
    if configured is not None:
        if "tempotrace" not in [p.strip() for p in configured.split(",")]:
            _log.warning("OTEL_PROPAGATORS=%r has no 'tempotrace': hops will not carry tt-ext", configured)
        elif tracestate_fallback is not None:  # the SDK built ours with no arguments: apply the option
            current = get_global_textmap()
            for p in [current, *getattr(current, "_propagators", [])]:
                if isinstance(p, TempoTracePropagator):
                    p.tracestate_fallback = tracestate_fallback
        return
    set_global_textmap(
        CompositePropagator(
            [
                TraceContextTextMapPropagator(),
                W3CBaggagePropagator(),
                TempoTracePropagator(tracestate_fallback=tracestate_fallback),
            ]
        )
    )
