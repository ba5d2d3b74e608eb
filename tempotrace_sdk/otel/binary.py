"""gRPC binary metadata: the 53-byte form under ``tt-ext-bin`` (spec/tt-ext-v3.md §6).

gRPC metadata is a sequence of ``(key, value)`` pairs; keys ending in
``-bin`` carry bytes. Client side::

    metadata = [("authorization", token)]
    inject_binary(metadata)                 # appends ("tt-ext-bin", b"...") in place
    stub.Call(request, metadata=metadata)

    # a tuple (or None) is left alone; send the list returned instead:
    stub.Call(request, metadata=inject_binary((("authorization", token),)))

Server side (inside a servicer method)::

    ctx = extract_binary(context.invocation_metadata())
    with tracer.start_as_current_span("Call", context=ctx): ...

Like the text propagator, none of these raises into the program: extract
counts every refusal, inject counts every failure and sends no header.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from opentelemetry import context as context_api

from ..errors import HeaderError
from ..wire import TTExt
from ..wire.layout import BINARY_HEADER
from .context import TempoTraceState, get_state
from .hop import receive, reject, send

__all__ = ["BINARY_HEADER", "binary_header", "extract_binary", "inject_binary"]

_log = logging.getLogger(__name__)


def binary_header(
    context: context_api.Context | None = None, *, state: TempoTraceState | None = None
) -> tuple[str, bytes] | None:
    """A send event, as the ``("tt-ext-bin", 53 bytes)`` metadata pair.

    ``None`` when ``context`` (default: the current one) holds no valid span
    context -- a header beside no trace context means nothing -- or when no
    header can be made (e.g. the clock failed): that error is counted under
    ``"binary_header"`` in ``state.errors()`` and logged at debug; this never
    raises into the caller.
    """
    st = state if state is not None else get_state()
    try:
        raw = send(st, context)
        return None if raw is None else (BINARY_HEADER, raw)
    except Exception:
        st.count_error("binary_header")
        _log.debug("tempotrace: binary_header failed", exc_info=True)
        return None


def inject_binary(
    metadata: Iterable[tuple[str, Any]] | None,
    context: context_api.Context | None = None,
    *,
    state: TempoTraceState | None = None,
) -> list[tuple[str, Any]]:
    """Add the header to gRPC metadata, replacing any earlier one; return the metadata to send.

    A list is updated in place and returned (the same object). Any other
    iterable of pairs -- a tuple, as in ``metadata=(("k", "v"),)`` -- or
    ``None`` is left alone and a new list is returned. Never raises: when no
    header can be made (e.g. the clock failed) the error is counted under
    ``"inject_binary"`` in ``state.errors()``, any earlier ``tt-ext-bin`` is
    still removed (it belongs to another send) and no header is added.
    """
    st = state if state is not None else get_state()
    try:
        kept = [item for item in metadata or () if not _is_ours(item)]
        out = metadata if isinstance(metadata, list) else []
        out[:] = kept
    except Exception:  # not an iterable of pairs: the caller's object is left as it is
        st.count_error("inject_binary")
        _log.debug("tempotrace: inject_binary: unreadable metadata", exc_info=True)
        return metadata if isinstance(metadata, list) else []
    try:
        raw = send(st, context)
        if raw is not None:  # None: no valid trace context, nothing to send
            out.append((BINARY_HEADER, raw))
    except Exception:
        st.count_error("inject_binary")
        _log.debug("tempotrace: inject_binary failed", exc_info=True)
    return out


def _is_ours(item: Any) -> bool:
    return isinstance(item, (tuple, list)) and len(item) > 0 and item[0] == BINARY_HEADER


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
        header = TTExt.decode(value)  # measures the value before copying it
    except Exception as err:  # a peer's bad bytes or a malformed metadata object
        reject(st, err, BINARY_HEADER)
        return context
    try:
        return receive(st, header, context, value if type(value) is bytes else None)
    except Exception:
        st.count_error("extract_binary")
        return context
