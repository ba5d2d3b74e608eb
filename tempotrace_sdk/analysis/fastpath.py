"""A fast reader for the exact lines the OTLP JSON file exporter writes (spec/analysis.md §5).

``json.loads`` builds a dict for every attribute of every span, and that is
most of the cost of reading a trace. The exporter writes compact JSON with a
fixed shape, so for a line that provably has that shape the fields we need can
be cut out with a few regular expressions instead.

Eligibility is checked, never assumed. A line qualifies only when it has no
backslash (so every ``"`` delimits a string and structural patterns such as
``{"traceId":"`` cannot occur inside a string value), a single resource, no
span events or links (whose own traceId/name/attributes would confuse the
cut), and every ``{"key":"tempotrace.`` attribute matched one of the value
shapes we read. Anything else returns None and the caller parses the line
with ``json.loads``; so does any validation error, so error messages are the
slow path's. A test checks both paths give identical records.
"""

from __future__ import annotations

import re
from typing import Any

from .. import semconv as S
from .events import SpanRecord

__all__ = ["parse_line_fast"]

_ATTR = re.compile(
    r'\{"key":"(tempotrace\.[a-z_.]+)","value":\{"(intValue|stringValue|arrayValue)":'
    r'("[^"]*"|\{"values":\[[^\]]*\]\})\}\}'
)
_ARRAY_INT = re.compile(r'^\{"values":\[(?:\{"intValue":"-?\d+"\}(?:,(?!\])|(?=\])))*\]\}$')
_INTS = re.compile(r'"intValue":"(-?\d+)"')
_HEAD = re.compile(
    r'^([^"]*)","spanId":"([^"]*)"(?:,"traceState":"[^"]*")?(?:,"parentSpanId":"([^"]*)")?'
    r'(?:,"flags":\d+)?,"name":"([^"]*)","kind":(\d+),"startTimeUnixNano":"(\d+)","endTimeUnixNano":"(\d+)"'
)
_RESOURCE_HOST = re.compile(r'\{"key":"(?:tempotrace\.host|host\.name)","value":\{"stringValue":"([^"]*)"\}\}')
_SPAN_MARK = '{"traceId":"'
_ATTR_MARK = '{"key":"tempotrace.'


_INT_FIELDS = frozenset({
    S.PTP_NS, S.UNCERTAINTY_NS, S.LTS, S.END_PTP_NS, S.END_UNCERTAINTY_NS, S.END_LTS, S.REMOTE_PTP_NS,
    S.REMOTE_UNCERTAINTY_NS, S.REMOTE_LTS, S.RECV_LTS, S.RANK,
})
_STR_FIELDS = frozenset({S.CLK_QUALITY, S.END_CLK_QUALITY, S.REMOTE_CLK_QUALITY, S.SVC_SKETCH,
                         S.REMOTE_SVC_SKETCH, S.HOST, S.CLOCK, S.CLOCK_PROFILE})
_ARRAY_FIELDS = frozenset({S.SEND_LTS, S.SEND_PTP_NS, S.SEND_UNCERTAINTY_NS})
#: attribute -> the one OTLP value kind we accept for it on the fast path
_WANTED: dict[str, str] = {
    **dict.fromkeys(_INT_FIELDS, "intValue"),
    **dict.fromkeys(_STR_FIELDS, "stringValue"),
    **dict.fromkeys(_ARRAY_FIELDS, "arrayValue"),
}


def _attrs(found: list[tuple[str, str, str]]) -> dict[str, Any] | None:
    """Convert only the attributes the analysis reads; None when one has an unexpected shape."""
    attrs: dict[str, Any] = {}
    wanted = _WANTED
    for key, kind, raw in found:
        want = wanted.get(key)
        if want is None:
            continue
        if kind != want:
            return None
        if want == "intValue":
            attrs[key] = int(raw[1:-1])  # ValueError -> caller falls back
        elif want == "stringValue":
            attrs[key] = raw[1:-1]
        else:
            if _ARRAY_INT.match(raw) is None:
                return None
            attrs[key] = [int(x) for x in _INTS.findall(raw)]
    return attrs


def parse_line_fast(text: str, line: int, build: Any, owns: Any = None) -> list[SpanRecord] | None:
    """Records of one eligible line, or None (not eligible / not valid: use the JSON path).

    ``build`` is the reader's ``record_from_attrs`` (shared validation); ``owns``,
    when given, says from the trace id which spans this worker wants: the others
    are skipped before any work is spent on them."""
    if (
        "\\" in text
        or not text.startswith('{"resourceSpans":[{"resource":')
        or text.count('"resource":') != 1
        or '"events":' in text
        or '"links":' in text
    ):
        return None
    chunks = text.split(_SPAN_MARK)
    host_match = _RESOURCE_HOST.search(chunks[0].split('"scopeSpans":', 1)[0])  # the resource's, not a scope's
    resource_host = host_match.group(1) if host_match else None
    out = []
    try:
        for chunk in chunks[1:]:
            cut = chunk.find('"scope":')
            if cut >= 0:  # the next scope's header follows this span: it belongs to no span
                chunk = chunk[:cut]
            if owns is not None and not owns(chunk[:32]):
                continue
            head = _HEAD.match(chunk)
            if head is None:
                return None
            found = _ATTR.findall(chunk)
            if len(found) != chunk.count(_ATTR_MARK):
                return None
            attrs = _attrs(found)
            if attrs is None:
                return None
            trace_id, span_id, parent, name, kind_s, start, end = head.groups()
            if parent is None and '"parentSpanId":' in chunk:
                return None  # a parent id elsewhere than the exporter puts it
            if len(trace_id) != 32 or len(span_id) != 16 or (parent is not None and len(parent) != 16):
                return None  # base64 ids or odd sizes: the JSON path normalises them
            int(trace_id, 16), int(span_id, 16)
            if parent:
                int(parent, 16)
            out.append(build(trace_id.lower(), span_id.lower(), (parent or "").lower(), name, int(kind_s), attrs,
                             int(start), int(end), resource_host, line))
    except ValueError:
        return None
    return out
