"""Ended op records straight into OTLP JSON spans, in C (spec/torch.md §1.4, "Spans from records").

Under ``retain="export"`` each op's span was made as a ``ReadableSpan`` (opspans.make_span) and encoded by
otel/otlp_json.py: about ten times the record itself. Where the op spans go to one file exporter of ours
through our batch processor, native/opcall/tt_opspans.c writes each record's span as those two would, byte
for byte (tests/torch/test_op_spans_json.py), and the processor queues the bytes. This module builds, once
per release, what that pass needs already encoded: each group's attributes, each op's names, the parent
span's fields, the attributes a span gets from its process and from each clock epoch. A release it cannot
describe (a policy to judge, epochs no longer told apart, an exporter of another kind) returns None: the old
way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
from opentelemetry import trace
from opentelemetry.sdk.trace import sampling

from ..clocks._native import native
from ..clocks.leapseconds import leap_table
from ..otel.batching import TempoTraceBatchProcessor
from ..otel.context import TempoTraceState
from ..otel.file_export import JsonLinesSpanExporter
from ..otel.otlp_json import encodes_group, key_values_json
from ..otel.processor import QUALITY_NAMES, process_needs
from ..semconv import (
    CLK_QUALITY,
    CLOCK_EPOCH_BOUND_NS,
    CLOCK_EPOCH_NS,
    STAMPS,
    TORCH_BATCHED,
    TORCH_BYTES,
    TORCH_COMPLETION,
    TORCH_DST,
    TORCH_OP,
    TORCH_P2P_AMBIGUOUS,
    TORCH_P2P_SEQ,
    TORCH_PEER,
    TORCH_ROOT,
    TORCH_SEQ,
    TORCH_SRC,
    TORCH_TAG,
    UNCERTAINTY_NS,
)
from ..stamptext import TAI_UTC_BASE_NS
from ..torchops import SPECS, Kind
from .recorder import COMPLETIONS

try:
    from .. import _opcall

    _encode_ended = _opcall.encode_ended
except ImportError:  # no native build: every span is made the old way
    _encode_ended = None

__all__ = ["JsonSpans", "json_spans"]

_json = msgspec.json.encode
#: The names the quality attribute takes, by ClockQuality (the processor's own list).
_QUALITIES = tuple(_json(q) for q in QUALITY_NAMES)
_COMPLETIONS = tuple(_json(c) for c in COMPLETIONS)
#: An op's shape, as tt_opspans.c reads it: what its record's seq and root words hold (recorder.py).
_SHAPES = {Kind.COLLECTIVE: 0, Kind.SEND: 1, Kind.RECV: 2}
#: Per op index: the span name, the op attribute's value (both as JSON strings), its shape.
_OPS = tuple((_json("torch." + s.name), _json(s.name), _SHAPES[s.kind]) for s in SPECS)
#: The attributes the C pass writes itself (tt_opspans.c KEY_*), and the fragment before each value.
_OP_KEY_NAMES = (TORCH_OP, TORCH_BYTES, TORCH_ROOT, TORCH_SEQ, TORCH_COMPLETION, STAMPS, CLK_QUALITY, UNCERTAINTY_NS,
                 TORCH_TAG, TORCH_PEER, TORCH_SRC, TORCH_DST, TORCH_P2P_SEQ, TORCH_P2P_AMBIGUOUS, TORCH_BATCHED)
_KEYS = tuple(b'{"key":' + _json(k) + b',"value":' for k in _OP_KEY_NAMES)
_OP_KEYS = frozenset(_OP_KEY_NAMES)
#: Roots are sampled without asking these samplers (the SDK's default is DEFAULT_ON).
_ALWAYS = (sampling.ALWAYS_ON, sampling.DEFAULT_ON)


class SpanGroup:
    """The Resource and scope the encoded spans of one release belong to (otel/otlp_json.py groups by them)."""

    __slots__ = ("resource", "scope")

    def __init__(self, resource: Any, scope: Any) -> None:
        self.resource = resource
        self.scope = scope


class JsonSpans:
    """One release's arguments to the C pass; ``processor`` takes what it writes."""

    __slots__ = ("args", "processor")

    def __init__(self, processor: TempoTraceBatchProcessor, args: tuple[Any, ...]) -> None:
        self.processor = processor
        self.args = args

    def take(self, ring: tuple[Any, ...], low: int, last: int) -> tuple[list[Any], list[int], int, int]:
        """(items, numbers left ENDED for Python, first number still waiting or -1, records lost), as
        tt_opspans.h says."""
        assert _encode_ended is not None
        items, left, first_waiting, lost = _encode_ended(ring, low, last, *self.args)
        return items, left, first_waiting, lost


#: Each group's attributes as JSON, by GroupInfo identity (the recorder's groups live as long as the process).
_group_json: dict[int, tuple[Any, bytes]] = {}


def _groups(groups: Sequence[Any], tail_keys: frozenset[str]) -> list[bytes | None]:
    out: list[bytes | None] = []
    for info in groups:
        cached = _group_json.get(id(info))
        if cached is None or cached[0] is not info:
            cached = _group_json[id(info)] = (info, key_values_json(info.attributes))
        keys = info.attributes.keys()
        # a key the op or the stamps write again would keep its first place (dict.update): Python's
        out.append(None if not keys.isdisjoint(tail_keys) or not keys.isdisjoint(_OP_KEYS) else cached[1])
    return out


def _parent_of(context: Any) -> tuple[bytes, bytes] | bool | None:
    """What the C pass writes for the parent in ``context``: (trace id, ``traceState``/``parentSpanId``/
    ``flags`` fields), None when that parent was not sampled (no span), True for none (a root op)."""
    parent = trace.get_current_span(context).get_span_context()
    if parent is None or not parent.is_valid:
        return True
    if not parent.trace_flags.sampled:
        return None
    tail = b""
    if parent.trace_state:
        tail += b',"traceState":' + _json(",".join(f"{k}={v}" for k, v in parent.trace_state.items()))
    tail += b',"parentSpanId":"' + parent.span_id.to_bytes(8, "big").hex().encode() + b'"'
    tail += b',"flags":768' if parent.is_remote else b',"flags":256'
    return parent.trace_id.to_bytes(16, "big").hex().encode(), tail


class _Epochs:
    """The C pass's ``epochs()``: a fresh check of the host clock domain (after the pass has seen every record it
    takes ended, so each reading was taken before the check, as make_spans's ``checked_once`` after its take),
    then (each epoch's window as the pass tests a reading against it, or None without a domain; per epoch, the
    attributes its spans carry besides the stamps, as JSON); None when the domain no longer tells epochs apart
    (Python labels)."""

    __slots__ = ("domain", "needed", "resource")

    def __init__(self, domain: Any, needed: Mapping[str, Any] | None, resource: Any) -> None:
        self.domain = domain
        self.needed = needed
        self.resource = resource

    def __call__(self) -> tuple[Any, tuple[bytes, ...]] | None:
        needed = dict(self.needed or {})
        if self.domain is None:
            return None, (key_values_json(needed),)
        windows = self.domain.label_windows()  # (not inside checked_once: release's take comes first)
        if windows is None:
            return None
        resource = self.resource
        carried = self.needed if self.needed is not None else resource.attributes if resource is not None else {}
        tails = tuple(key_values_json(needed if carried.get(CLOCK_EPOCH_NS) == epoch.mid_ns else {
            **needed, CLOCK_EPOCH_NS: epoch.mid_ns, CLOCK_EPOCH_BOUND_NS: epoch.half_ns}) for epoch, _, _ in windows)
        return tuple((epoch.mid_ns, epoch.half_ns, since, limit) for epoch, since, limit in windows), tails


def json_spans(state: TempoTraceState, resource: Any, scope: Any, processors: Sequence[Any], groups: Sequence[Any],
               sampler: Any, nonce: int, nonce_high: int) -> JsonSpans | None:
    """The C pass for this release, or None where the spans must be made the old way. Not inside
    ``checked_once``: the pass checks the clock itself, after its scan."""
    if _encode_ended is None or len(processors) != 1 or native() is None:  # (TEMPOTRACE_PUREPYTHON)
        return None
    processor = processors[0]
    # exactly ours: the Parquet exporter (a subclass) and a user's exporter read ReadableSpans
    if type(processor) is not TempoTraceBatchProcessor or type(processor.exporter) is not JsonLinesSpanExporter:
        return None
    if state._policy is not None and state.contract is not None:
        return None  # a verdict per span
    if not encodes_group(resource, scope):
        return None  # a Resource or scope value otlp_json leaves to upstream's encoder, which reads ReadableSpans
    needed = process_needs(state, resource)
    # every key a span's tail may carry, whichever epochs the check finds
    tail_keys = frozenset(needed or ()) | {CLOCK_EPOCH_NS, CLOCK_EPOCH_BOUND_NS}
    table = leap_table()
    # every reading a second past the last leap maps by its offset (offset_at_tai compares a float there)
    boundary = (table.starts[-1] + table.offsets[-1] + 1) * 1_000_000_000
    leap = (boundary, table.offsets[-1] * 1_000_000_000, TAI_UTC_BASE_NS)
    args = (SpanGroup(resource, scope), nonce, nonce_high, _groups(groups, tail_keys), [g.rank for g in groups],
            _OPS, _parent_of, sampler is None or any(sampler is s for s in _ALWAYS), leap,
            _Epochs(state.domain, needed, resource), _KEYS, _COMPLETIONS, _QUALITIES)
    return JsonSpans(processor, args)
