"""Every use of OpenTelemetry SDK internals, in one place, probed once at import.

The processor writes a dozen attributes per span start and end, and the
public path (``set_attributes``) re-validates each value, which costs more
than the rest of the stamp. Where the installed SDK has the internals this
module expects (checked here on a real SDK span, once), our values go
straight into the span's attribute dict; anywhere else every function below
falls back to the public API, slower but with the same outcome.

What is used, and why:

- ``Span._attributes`` (``BoundedAttributes``): its ``_dict``, ``maxlen`` and
  ``max_value_len``: the direct store, used only when no configured limit
  could apply to our values; where one does, ``max_value_len`` tells how
  long our text may be before the SDK would cut it. The same ``_dict`` of a
  span's, event's, link's, resource's or scope's ``BoundedAttributes`` is
  read by the OTLP JSON encoder (the public view calls a Python
  ``__iter__`` and ``__getitem__`` per attribute: a third of the cost).
- ``Span._lock``: the end stamp written by our decorators just before
  ``end()``, under the same lock ``set_attributes`` and ``end()`` take.
- ``BoundedAttributes._immutable``: the SDK freezes a span's attributes
  before calling ``_on_ending`` (open-telemetry/opentelemetry-python#5614);
  when the direct store is not safe, the freeze is lifted for our keys only.
- ``SpanProcessor._on_ending``: the hook the SDK calls after the end time is
  fixed and before any exporter's ``on_end`` (SDK >= 1.40).
- The API's ``_RUNTIME_CONTEXT._current_context``: the ``ContextVar`` that
  ``get_current()`` reads, read directly by the C call of a traced torch op
  (native/opcall), which then needs no Python frame for it.

``PROBE`` says which of these the running SDK offers; the make step
``otel-sdk-matrix`` (mk/otel.mk) asserts it against the oldest supported and
the newest SDK.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Span, SpanProcessor

__all__ = [
    "PROBE",
    "attribute_store",
    "attributes_for_reading",
    "context_var",
    "on_ending_hook",
    "processors_of",
    "provider_processor",
    "set_after_end",
    "span_lock",
    "value_length_limit",
]

_log = logging.getLogger(__name__)

#: The name under which the SDK calls a processor between end time and on_end.
_ON_ENDING = "_on_ending"


def _probe() -> dict[str, bool]:
    """Which internals a real span of the installed SDK has (never raises)."""
    found = {"attribute_store": False, "span_lock": False, "immutable_flag": False, "on_ending": False}
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.sampling import ALWAYS_ON

        # A real span from a private provider (no processors, no exit hook,
        # sampled whatever OTEL_TRACES_SAMPLER says); never exported.
        provider = TracerProvider(sampler=ALWAYS_ON, resource=Resource({}), shutdown_on_exit=False)
        span = provider.get_tracer("tempotrace-probe").start_span("tempotrace-probe")
        bounded = getattr(span, "_attributes", None)
        store = getattr(bounded, "_dict", None)
        found["attribute_store"] = (
            type(store) is dict and hasattr(bounded, "maxlen") and hasattr(bounded, "max_value_len")
        )
        lock = getattr(span, "_lock", None)
        found["span_lock"] = hasattr(lock, "__enter__") and hasattr(lock, "__exit__")
        found["immutable_flag"] = isinstance(getattr(bounded, "_immutable", None), bool)
        found["on_ending"] = callable(getattr(SpanProcessor, _ON_ENDING, None))
        span.end()
    except Exception:  # an SDK this module does not know: every path is the public one
        _log.debug("tempotrace: SDK internals probe failed", exc_info=True)
    return found


#: What the installed SDK offers (see the module doc); fixed at import.
PROBE: dict[str, bool] = _probe()
_STORE = PROBE["attribute_store"]
_LOCK = PROBE["span_lock"]
_IMMUTABLE = PROBE["immutable_flag"]


def attribute_store(span: Span, adding: int) -> dict[str, Any] | None:
    """The span's attribute dict when ``adding`` of our values may go in without the SDK's checks.

    Our values are ints, short ASCII strings and int tuples that the SDK's
    cleaning would leave unchanged. The dict is handed out only when the
    span's limits cannot apply (no value-length limit, room for ``adding``
    more under the count limit); None means: use ``set_attributes``. The
    caller needs no lock in on_start (the span is not yet visible to other
    threads) nor in ``_on_ending`` (the SDK has already refused every other
    writer); elsewhere it holds ``span_lock``.
    """
    if not _STORE:
        return None
    try:
        bounded = span._attributes
        store = bounded._dict  # type: ignore[union-attr]
        if type(store) is dict and bounded.max_value_len is None:  # type: ignore[union-attr]
            maxlen = bounded.maxlen  # type: ignore[union-attr]
            if maxlen is None or len(store) + adding <= maxlen:
                return store
    except AttributeError:  # another SDK's span (or a wrapper): the public path
        pass
    return None


def attributes_for_reading(owner: Any) -> Mapping[str, Any] | None:
    """``owner.attributes`` (a span, event, link, resource or scope), for reading only.

    Where the SDK keeps them in a ``BoundedAttributes`` and the probe found
    its dict, that dict itself (an ended span's attributes no longer change;
    a concurrent change would make the caller's iteration raise, never read
    wrong values); otherwise the public property.
    """
    if _STORE:
        bounded = getattr(owner, "_attributes", None)
        if type(bounded) is BoundedAttributes:
            return bounded._dict
    return owner.attributes  # type: ignore[no-any-return]


def value_length_limit(span: Span) -> int | None:
    """The longest string value the span keeps (OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT), None when unlimited or
    unknown: the public path truncates longer strings, so the caller shortens its own first."""
    limit = getattr(getattr(span, "_attributes", None), "max_value_len", None)
    return limit if type(limit) is int else None


def span_lock(span: Span) -> AbstractContextManager[Any] | None:
    """The lock ``set_attributes`` and ``end()`` take on this span, or None."""
    if not _LOCK:
        return None
    lock = getattr(span, "_lock", None)
    return lock if hasattr(lock, "__enter__") else None


def set_after_end(span: Span, attrs: Mapping[str, Any]) -> bool:
    """Write ``attrs`` on a span the SDK froze before ``_on_ending``, through its validating setter.

    Used only when ``attribute_store`` refused (attribute limits configured):
    the freeze is lifted for our keys, each ``__setitem__`` validating and
    locking as usual, then restored (a later SDK may keep spans mutable here,
    open-telemetry/opentelemetry-python#5613). False when this SDK has no
    such flag: the values are then lost, and the caller counts that.
    """
    bounded = getattr(span, "_attributes", None)
    if not _IMMUTABLE or bounded is None or not isinstance(getattr(bounded, "_immutable", None), bool):
        return False
    was_immutable = bounded._immutable
    bounded._immutable = False
    try:
        for key, value in attrs.items():
            bounded[key] = value
    finally:
        bounded._immutable = was_immutable
    return True


P = TypeVar("P", bound=type)


def on_ending_hook(method_name: str) -> Callable[[P], P]:
    """Class decorator: bind the processor's ``method_name`` under the name the SDK calls before on_end."""

    def bind(cls: P) -> P:
        setattr(cls, _ON_ENDING, getattr(cls, method_name))
        return cls

    return bind


def processors_of(tracer: Any) -> tuple[Any, Any, Any, tuple[Any, ...]]:
    """(resource, instrumentation scope, its provider's multi-processor, that processor's processors) of an SDK
    ``Tracer``: where spans made without the SDK's ``Span`` (torch's op records) go. Nones and () for another
    tracer (a proxy, no SDK)."""
    multi = getattr(tracer, "span_processor", None)
    return (getattr(tracer, "resource", None), getattr(tracer, "_instrumentation_scope", None), multi,
            tuple(getattr(multi, "_span_processors", ())))


def provider_processor(provider: Any) -> Any:
    """The multi-processor a ``TracerProvider`` hands its tracers (None for another provider)."""
    return getattr(provider, "_active_span_processor", None)


def context_var() -> Any:
    """The ``ContextVar`` ``opentelemetry.context.get_current()`` reads, when the runtime context is the API's
    own contextvars one (the default); None for any other (``OTEL_PYTHON_CONTEXT``): call ``get_current()``."""
    from opentelemetry import context
    from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext

    runtime = getattr(context, "_RUNTIME_CONTEXT", None)
    var = getattr(runtime, "_current_context", None) if type(runtime) is ContextVarsRuntimeContext else None
    return var if isinstance(var, contextvars.ContextVar) else None
