"""``@traced`` and ``span(...)``: spans timed by our clock, ended with an honest end stamp.

The start and end times handed to OpenTelemetry come from the configured
clock source (TAI), converted to the Unix-epoch UTC the SDK expects, so the
span's own times and its ``tempotrace.*`` stamps are the same two readings.
Before ``span.end()`` the end stamp (``tempotrace.end.*``) is written with
public API. Generators and async generators are traced from their first
resumption to their exhaustion or close; the span is current only while
their body runs, never while the caller holds the paused generator.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import AsyncGenerator, Callable, Generator
from types import TracebackType
from typing import Any, TypeVar, overload

from opentelemetry import context as context_api
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util import types

from ..clocks.base import Timestamp
from ..clocks.leapseconds import tai_to_utc_ns
from .context import get_state
from .processor import pending_start, stamp_end

__all__ = ["span", "traced"]

F = TypeVar("F", bound=Callable[..., Any])

_log = logging.getLogger(__name__)

_INSTRUMENTATION = "tempotrace_sdk"
_tracer_cache: tuple[object, trace.Tracer] | None = None


def _tracer() -> trace.Tracer:
    global _tracer_cache
    provider = trace.get_tracer_provider()
    cached = _tracer_cache
    if cached is not None and cached[0] is provider:
        return cached[1]
    tracer = provider.get_tracer(_INSTRUMENTATION)
    _tracer_cache = (provider, tracer)
    return tracer


def _start_span(
    name: str,
    attributes: types.Attributes,
    kind: SpanKind,
    tracer: trace.Tracer | None,
    context: context_api.Context | None = None,
) -> Span:
    ts = _now()
    if ts is None:  # no usable clock: still trace, with the SDK's own start time
        return (tracer or _tracer()).start_span(name, context=context, kind=kind, attributes=attributes)
    start_utc = tai_to_utc_ns(ts.ptp_ns)
    token = pending_start.set((start_utc, ts, None))
    try:
        return (tracer or _tracer()).start_span(
            name, context=context, kind=kind, attributes=attributes, start_time=start_utc
        )
    finally:
        pending_start.reset(token)


def _now() -> Timestamp | None:
    # The decorated function is the user's program: a clock that fails must
    # not make it fail. The processor's hooks count their own failures.
    state = get_state()
    try:
        return state.clock.now()
    except Exception:
        state.count_error("decorator_clock")
        _log.debug("tempotrace: clock read failed in a decorator", exc_info=True)
        return None


def _finish_span(sp: Span, exc: BaseException | None) -> None:
    state = get_state()
    ts = _now()
    if sp.is_recording():
        if exc is not None and not isinstance(exc, GeneratorExit):
            sp.record_exception(exc)
            sp.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        span_id = sp.get_span_context().span_id
        if ts is not None and span_id in state.live:  # our processor stamped the start; stamp the end too
            try:
                stamp_end(state, sp, span_id, ts)  # type: ignore[arg-type]  # an SDK span: it is in live
            except Exception:
                state.count_error("span_end")
    sp.end(end_time=None if ts is None else tai_to_utc_ns(ts.ptp_ns))


class span:  # lower case: it reads like a function, ``with span("step"):``
    """Context manager: a current span whose start/end come from our clock.

    ``with span("all-reduce", attributes={"bytes": n}) as s: ...`` and the
    same with ``async with``. ``context`` gives the parent explicitly (a
    server handler passes what ``extract`` returned). Exceptions are
    recorded and set the status to ERROR, then propagate. One ``span``
    object is used for one ``with``.
    """

    __slots__ = ("_attrs", "_context", "_kind", "_name", "_span", "_token", "_tracer")

    def __init__(
        self,
        name: str,
        *,
        attributes: types.Attributes = None,
        kind: SpanKind = SpanKind.INTERNAL,
        context: context_api.Context | None = None,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self._name = name
        self._context = context
        self._attrs = attributes
        self._kind = kind
        self._tracer = tracer
        self._span: Span | None = None
        self._token: object = None

    def __enter__(self) -> Span:
        sp = _start_span(self._name, self._attrs, self._kind, self._tracer, self._context)
        self._span = sp
        self._token = context_api.attach(trace.set_span_in_context(sp))
        return sp

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        sp = self._span
        if sp is None:
            return
        self._span = None
        try:
            context_api.detach(self._token)  # type: ignore[arg-type]
        finally:
            _finish_span(sp, exc)

    async def __aenter__(self) -> Span:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)


@overload
def traced(func: F, /) -> F: ...
@overload
def traced(
    func: None = None, /, *, name: str | None = None, attributes: types.Attributes = None, kind: SpanKind = ...
) -> Callable[[F], F]: ...


def traced(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    attributes: types.Attributes = None,
    kind: SpanKind = SpanKind.INTERNAL,
) -> Any:
    """Trace every call of a function, coroutine function, generator or async generator.

    ``@traced`` names the span after the function's qualified name;
    ``@traced(name="step", attributes={...}, kind=SpanKind.CLIENT)`` sets them.
    """

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        span_name = name or f.__qualname__
        if inspect.isasyncgenfunction(f):
            return _wrap_async_gen(f, span_name, attributes, kind)
        if inspect.isgeneratorfunction(f):
            return _wrap_gen(f, span_name, attributes, kind)
        if inspect.iscoroutinefunction(f):

            @functools.wraps(f)
            async def run_coroutine(*args: Any, **kwargs: Any) -> Any:
                with span(span_name, attributes=attributes, kind=kind):
                    return await f(*args, **kwargs)

            return run_coroutine

        @functools.wraps(f)
        def run(*args: Any, **kwargs: Any) -> Any:
            with span(span_name, attributes=attributes, kind=kind):
                return f(*args, **kwargs)

        return run

    return decorate(func) if func is not None else decorate


def _wrap_gen(
    f: Callable[..., Generator[Any, Any, Any]], name: str, attributes: types.Attributes, kind: SpanKind
) -> Callable[..., Generator[Any, Any, Any]]:
    @functools.wraps(f)
    def run(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        gen = f(*args, **kwargs)
        sp = _start_span(name, attributes, kind, None)
        ctx = trace.set_span_in_context(sp)
        to_send: Any = None
        to_throw: BaseException | None = None
        failure: BaseException | None = None
        try:
            while True:
                token = context_api.attach(ctx)
                try:
                    if to_throw is not None:
                        exc, to_throw = to_throw, None
                        item = gen.throw(exc)
                    else:
                        item = gen.send(to_send)
                except StopIteration as stop:
                    return stop.value
                finally:
                    context_api.detach(token)
                try:
                    to_send = yield item
                except GeneratorExit:
                    gen.close()
                    raise
                except BaseException as exc:  # thrown in by the caller: pass it on to the body
                    to_throw = exc
        except BaseException as exc:
            failure = exc
            raise
        finally:
            _finish_span(sp, failure)

    return run


def _wrap_async_gen(
    f: Callable[..., AsyncGenerator[Any, Any]], name: str, attributes: types.Attributes, kind: SpanKind
) -> Callable[..., AsyncGenerator[Any, Any]]:
    @functools.wraps(f)
    async def run(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        agen = f(*args, **kwargs)
        sp = _start_span(name, attributes, kind, None)
        ctx = trace.set_span_in_context(sp)
        to_send: Any = None
        to_throw: BaseException | None = None
        failure: BaseException | None = None
        try:
            while True:
                token = context_api.attach(ctx)
                try:
                    if to_throw is not None:
                        exc, to_throw = to_throw, None
                        item = await agen.athrow(exc)
                    else:
                        item = await agen.asend(to_send)
                except StopAsyncIteration:
                    return
                finally:
                    context_api.detach(token)
                try:
                    to_send = yield item
                except GeneratorExit:
                    await agen.aclose()
                    raise
                except BaseException as exc:
                    to_throw = exc
        except BaseException as exc:
            failure = exc
            raise
        finally:
            _finish_span(sp, failure)

    return run
