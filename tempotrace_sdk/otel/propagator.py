"""The ``tempotrace`` TextMapPropagator: tt-ext on every hop (spec/tt-ext-v3.md §5, §6).

Load it with ``OTEL_PROPAGATORS=tracecontext,baggage,tempotrace`` (entry point
``opentelemetry_propagator: tempotrace``) or construct it directly. Every
instance shares the process's Lamport counter, clock and tenant.
"""

from __future__ import annotations

import logging
import os
import typing
from collections.abc import Mapping

from opentelemetry import context as context_api
from opentelemetry import trace
from opentelemetry.propagators.textmap import (
    CarrierT,
    Getter,
    Setter,
    TextMapPropagator,
    default_getter,
    default_setter,
)
from opentelemetry.trace.span import TraceState

from ..errors import TextFormError
from ..wire import TTExt
from ..wire.header import header_text
from ..wire.layout import TEXT_HEADER, TRACESTATE_KEY
from .context import TempoTraceState, get_state
from .hop import receive, reject, send

__all__ = ["TRACESTATE_FALLBACK_ENV", "TempoTracePropagator"]

_log = logging.getLogger(__name__)

#: "1"/"true"/"yes"/"on" turns the tracestate fallback on for no-argument instances.
TRACESTATE_FALLBACK_ENV = "TEMPOTRACE_TRACESTATE_FALLBACK"

#: Received tracestate longer than this (all lines together) is not scanned
#: for our member: W3C caps the header at 512 characters, and a hostile peer
#: may send megabytes.
MAX_TRACESTATE_INPUT = 4096


_TT_EXT = TEXT_HEADER


def _duplicate() -> TextFormError:
    return TextFormError("text", "header present more than once", error_class="TEXT_MULTIPLE", remote=True)


def _not_str() -> TextFormError:
    return TextFormError("text", "must be a single string", error_class="TEXT_TYPE", remote=True)


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


class TempoTracePropagator(TextMapPropagator):
    """Injects and extracts the ``tt-ext`` header.

    Options (keywords): ``tracestate_fallback`` also writes the header as the
    ``tt=`` member of ``tracestate`` (merged into the current span's
    tracestate, never replacing it) and reads it from there when ``tt-ext``
    is absent; default from $TEMPOTRACE_TRACESTATE_FALLBACK. ``state`` uses
    a private ``TempoTraceState`` instead of the process one (tests).
    """

    TT_EXT_HEADER = TEXT_HEADER
    TRACESTATE_HEADER = "tracestate"

    def __init__(self, *, tracestate_fallback: bool | None = None, state: TempoTraceState | None = None) -> None:
        self._fallback = _env_flag(TRACESTATE_FALLBACK_ENV) if tracestate_fallback is None else tracestate_fallback
        self._state = state

    @property
    def state(self) -> TempoTraceState:
        return self._state if self._state is not None else get_state()

    @property
    def tracestate_fallback(self) -> bool:
        return self._fallback

    @tracestate_fallback.setter
    def tracestate_fallback(self, on: bool) -> None:
        self._fallback = bool(on)

    @property
    def fields(self) -> set[str]:
        if self._fallback:
            return {self.TT_EXT_HEADER, self.TRACESTATE_HEADER}
        return {self.TT_EXT_HEADER}

    def rejections(self) -> dict[str, int]:
        """Headers this process refused at extract, by error class."""
        return self.state.rejections()

    # -- extract: a receive event -------------------------------------------------
    def extract(
        self,
        carrier: CarrierT,
        context: context_api.Context | None = None,
        getter: Getter[CarrierT] = default_getter,
    ) -> context_api.Context:
        if context is None:
            context = context_api.Context()
        state = self._state
        if state is None:
            state = get_state()
        try:
            # The usual carrier (a dict of str, default getter) read directly;
            # anything else, or any value that is not a plain str, takes the
            # general path with its checks. Same outcome either way.
            if getter is default_getter and type(carrier) is dict:
                value = carrier.get(_TT_EXT)  # type: ignore[attr-defined]
            else:
                value = None
            if type(value) is not str:
                value = self._read(carrier, getter, context)
                if value is None:
                    return context
            header = TTExt.from_header(value)
        except Exception as err:  # HeaderError, or a hostile getter/carrier: never into the user's program
            reject(state, err, _TT_EXT)
            return context
        try:
            return receive(state, header, context, value)
        except Exception:
            state.count_error("extract")
            _log.debug("tempotrace: extract failed", exc_info=True)
            return context

    def _read(self, carrier: CarrierT, getter: Getter[CarrierT], context: context_api.Context) -> str | None:
        if getter is default_getter and hasattr(carrier, "get_all"):
            # email.message.Message (http.server's self.headers): .get() would
            # silently pick the first of repeated fields; spec §5.3 forbids that.
            values = carrier.get_all(self.TT_EXT_HEADER)
        elif getter is default_getter and isinstance(carrier, Mapping):
            # The default getter turns any non-str iterable into a list: a 10 MB
            # bytes value became ten million ints (56 ms) and then "several
            # values". Judged by its type first, before anything is copied.
            values = carrier.get(self.TT_EXT_HEADER)
            if values is not None and not isinstance(values, (str, list, tuple)):
                raise _not_str()
        else:
            values = getter.get(carrier, self.TT_EXT_HEADER)
        if values is None and self._fallback:
            # tracestate means something only beside a valid traceparent (W3C);
            # the tracecontext propagator runs before us in the composite.
            if not trace.get_current_span(context).get_span_context().is_valid:
                return None
            return _tracestate_member(getter.get(carrier, self.TRACESTATE_HEADER))
        if values is None:
            return None
        if isinstance(values, str):  # a getter that breaks the list contract
            return values
        if not isinstance(values, (list, tuple)):
            raise _not_str()
        if len(values) != 1:
            if not values:
                return None
            raise _duplicate()
        value = values[0]
        if not isinstance(value, str):
            raise _not_str()
        return value

    # -- inject: a send event -------------------------------------------------------
    def inject(
        self,
        carrier: CarrierT,
        context: context_api.Context | None = None,
        setter: Setter[CarrierT] = default_setter,
    ) -> None:
        state = self._state
        if state is None:
            state = get_state()
        try:
            text = send(state, context, header_text)
            if text is None:  # no valid trace context: a tt-ext alone means nothing to a receiver
                return
            if setter is default_setter and type(carrier) is dict:
                carrier[_TT_EXT] = text  # type: ignore[index]  # = default_setter.set, without its frame
            else:
                setter.set(carrier, self.TT_EXT_HEADER, text)
            if self._fallback:
                span_context = trace.get_current_span(context).get_span_context()
                if span_context.is_valid:  # tracestate without traceparent means nothing (W3C)
                    setter.set(carrier, self.TRACESTATE_HEADER, _merged_tracestate(span_context.trace_state, text))
        except Exception:
            state.count_error("inject")
            _log.debug("tempotrace: inject failed", exc_info=True)


#: W3C tracestate limits: list members, header length, and the size above
#: which a member is dropped first when the header is too long.
_TS_MAX_MEMBERS = 32
_TS_MAX_LEN = 512
_TS_BIG_MEMBER = 128


def _merged_tracestate(existing: TraceState, text: str) -> str:
    """Spec §6 "Writing": our member at the front, everyone else kept in order."""
    ours = f"{TRACESTATE_KEY}={text}"
    others = [f"{k}={v}" for k, v in existing.items() if k != TRACESTATE_KEY][: _TS_MAX_MEMBERS - 1]
    if len(",".join([ours, *others])) > _TS_MAX_LEN:
        others = [m for m in others if len(m) <= _TS_BIG_MEMBER]
        while others and len(",".join([ours, *others])) > _TS_MAX_LEN:
            others.pop()
    return ",".join([ours, *others])


_OWS = " \t"


def _tracestate_member(values: typing.Any) -> str | None:
    """The ``tt`` member of a received tracestate (all its field lines), or None.

    Several ``tt`` members are TEXT_MULTIPLE (spec §6); other members are not
    judged here (the tracecontext propagator owns them).
    """
    if isinstance(values, str):
        values = [values]
    if not values or not isinstance(values, (list, tuple)) or not all(isinstance(v, str) for v in values):
        return None
    joined = ",".join(values)
    if len(joined) > MAX_TRACESTATE_INPUT:
        raise TextFormError(
            "tracestate", f"longer than {MAX_TRACESTATE_INPUT} characters", error_class="TEXT_LENGTH", remote=True
        )
    found = None
    for member in joined.split(","):
        key, sep, value = member.strip(_OWS).partition("=")
        if sep and key == TRACESTATE_KEY:
            if found is not None:
                raise _duplicate()
            found = value
    return found
