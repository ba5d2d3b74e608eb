"""gRPC binary metadata: the 53-byte form under ``tt-ext-bin`` (spec/tt-ext-v3.md §6).

gRPC metadata is a sequence of ``(key, value)`` pairs; keys ending in
``-bin`` carry bytes. Client side::

    metadata = [("authorization", token)]
    inject_binary(metadata)                 # appends ("tt-ext-bin", b"...")
    stub.Call(request, metadata=metadata)

Server side (inside a servicer method)::

    ctx = extract_binary(context.invocation_metadata())
    with tracer.start_as_current_span("Call", context=ctx): ...

Like the text propagator, extract never raises and counts every refusal.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opentelemetry import context as context_api

from ..errors import HeaderError
from ..wire import TTExt
from ..wire._layout import BINARY_HEADER
from .context import TempoTraceState, get_state
from .hop import receive, reject, send

__all__ = ["BINARY_HEADER", "binary_header", "extract_binary", "inject_binary"]


def binary_header(
    context: context_api.Context | None = None, *, state: TempoTraceState | None = None
) -> tuple[str, bytes]:
    """A send event, as the ``("tt-ext-bin", 53 bytes)`` metadata pair."""
    return BINARY_HEADER, send(state if state is not None else get_state(), context)


def inject_binary(
    metadata: list[tuple[str, Any]],
    context: context_api.Context | None = None,
    *,
    state: TempoTraceState | None = None,
) -> None:
    """Append the header to a gRPC metadata list, replacing any earlier one."""
    metadata[:] = [item for item in metadata if not (isinstance(item, tuple) and item[:1] == (BINARY_HEADER,))]
    metadata.append(binary_header(context, state=state))


def extract_binary(
    metadata: Iterable[Any] | None,
    context: context_api.Context | None = None,
    *,
    state: TempoTraceState | None = None,
) -> context_api.Context:
    """``context`` (default: a new empty one) carrying the received header, if valid."""
    if context is None:
        context = context_api.Context()
    st = state if state is not None else get_state()
    try:
        values = [item[1] for item in metadata or () if item[0] == BINARY_HEADER]
        if not values:
            return context
        if len(values) > 1:
            raise HeaderError("length", "tt-ext-bin present more than once", error_class="TEXT_MULTIPLE", remote=True)
        value = values[0]
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise HeaderError("length", "tt-ext-bin value must be bytes", error_class="BINARY_TYPE", remote=True)
        header = TTExt.decode(value)
    except Exception as err:  # a peer's bad bytes or a malformed metadata object
        reject(st, err, BINARY_HEADER)
        return context
    try:
        return receive(st, header, context)
    except Exception:
        st.count_error("extract_binary")
        return context
