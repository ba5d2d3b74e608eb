"""A fast reader for the exact lines the OTLP JSON file exporter writes (spec/analysis.md §5).

``json.loads`` builds a dict for every attribute of every span, and that is
most of the cost of reading a trace. The exporter writes compact JSON with a
fixed shape, so for a line that provably has that shape the fields we need can
be cut out with a few regular expressions instead.

Eligibility is checked, never assumed. A line qualifies only when it has no
backslash (so every ``"`` delimits a string and structural patterns such as
``{"traceId":"`` cannot occur inside a string value), a single resource, no
span events or links (whose own traceId/name/attributes would confuse the
cut), the exporter's closing brackets (a line cut short steps aside), and
every ``{"key":"tempotrace.`` attribute matched one of the value shapes we
read. Anything else returns None and the caller parses the line with
``json.loads``; so does any validation error, so error messages are the slow
path's. Returning None is always safe: it only costs time. Tests check both
paths give identical records.

Per span the cost is one regex ``findall`` over its attributes turned into a
dict with one C call: each key is the attribute name *and* its value kind
(``tempotrace.lts","value":{"intValue":"``), so a wanted attribute of
the wrong kind is a key from a small "bad" set, found with one set test, and
values are converted only for the attributes the analysis reads. The record is
built here with the reader's rules (``otlp_reader.record_from_attrs``): same
ranges, same defaults, same result.
"""

from __future__ import annotations

import re
from typing import Any

from .. import semconv as S
from ..wire._layout import UNCERTAINTY_SATURATED
from .events import QUALITIES, SpanRecord, Stamp, make_stamp

__all__ = ["parse_line_fast"]

#: int- and string-valued attributes; group 1 is "name + value kind" (module doc), group 2 the raw value.
#: An intValue must be a plain decimal: the JSON path converts every tempotrace int, wanted or not.
_SCALAR = re.compile(
    r'\{"key":"(tempotrace\.[^"]+","value":\{"(?:intValue":"(?=-?\d+")|stringValue":"))([^"]*)"\}\}'
)
_ARRAY = re.compile(r'\{"key":"(tempotrace\.[a-z_.]+)","value":\{"arrayValue":(\{"values":\[[^\]]*\]\})\}\}')
_ARRAY_INT = re.compile(r'^\{"values":\[(?:\{"intValue":"-?\d+"\}(?:,(?!\])|(?=\])))*\]\}$')
_INTS = re.compile(r'"intValue":"(-?\d+)"')
_HEAD = re.compile(
    r'^([^"]*)","spanId":"([^"]*)"(?:,"traceState":"[^"]*")?(?:,"parentSpanId":"([^"]*)")?'
    r'(?:,"flags":\d+)?,"name":"([^"]*)","kind":(\d+),"startTimeUnixNano":"(\d+)","endTimeUnixNano":"(\d+)"'
)
_RESOURCE_HOST = re.compile(r'\{"key":"(?:tempotrace\.host|host\.name)","value":\{"stringValue":"([^"]*)"\}\}')
_SPAN_MARK = '{"traceId":"'
_ATTR_MARK = '{"key":"tempotrace.'
#: how the exporter's line ends: spans ] scope } scopeSpans ] resource } resourceSpans ] document }
_LINE_END = "]}]}]}"


def _i(name: str) -> str:
    return name + '","value":{"intValue":"'


def _s(name: str) -> str:
    return name + '","value":{"stringValue":"'


_INT_FIELDS = (S.PTP_NS, S.UNCERTAINTY_NS, S.LTS, S.END_PTP_NS, S.END_UNCERTAINTY_NS, S.END_LTS, S.REMOTE_PTP_NS,
               S.REMOTE_UNCERTAINTY_NS, S.REMOTE_LTS, S.RECV_LTS, S.RANK)
_STR_FIELDS = (S.CLK_QUALITY, S.END_CLK_QUALITY, S.REMOTE_CLK_QUALITY, S.SVC_SKETCH, S.REMOTE_SVC_SKETCH, S.HOST,
               S.CLOCK, S.CLOCK_PROFILE)
_ARRAY_FIELDS = frozenset({S.SEND_LTS, S.SEND_PTP_NS, S.SEND_UNCERTAINTY_NS})
_SCALAR_FIELDS = frozenset(_INT_FIELDS + _STR_FIELDS)
#: a wanted attribute in a value kind the analysis does not read for it: the JSON path must judge the line
_BAD = frozenset(
    [_s(k) for k in _INT_FIELDS] + [_i(k) for k in _STR_FIELDS] + [f(k) for k in _ARRAY_FIELDS for f in (_i, _s)]
)

_PTP, _UNC, _LTS = _i(S.PTP_NS), _i(S.UNCERTAINTY_NS), _i(S.LTS)
_EPTP, _EUNC, _ELTS = _i(S.END_PTP_NS), _i(S.END_UNCERTAINTY_NS), _i(S.END_LTS)
_RPTP, _RUNC, _RLTS = _i(S.REMOTE_PTP_NS), _i(S.REMOTE_UNCERTAINTY_NS), _i(S.REMOTE_LTS)
_QUAL, _EQUAL, _RQUAL = _s(S.CLK_QUALITY), _s(S.END_CLK_QUALITY), _s(S.REMOTE_CLK_QUALITY)
_RECV, _RANK = _i(S.RECV_LTS), _i(S.RANK)
_SKETCH, _RSKETCH = _s(S.SVC_SKETCH), _s(S.REMOTE_SVC_SKETCH)
_HOST, _CLOCK, _PROFILE = _s(S.HOST), _s(S.CLOCK), _s(S.CLOCK_PROFILE)

_MAX = 2**63 - 1  # otlp_reader._int's default range
_SAT = UNCERTAINTY_SATURATED
_QUALITIES = frozenset(QUALITIES)
_NO_STAMP = Stamp(None)


def _int(raw: str | None) -> int | None:
    """otlp_reader._int on a raw decimal string; ValueError sends the line to the JSON path."""
    if raw is None:
        return None
    v = int(raw)
    if not 0 <= v <= _MAX:
        raise ValueError(raw)
    return v


def _stamp(d: dict[str, str], kp: str, ku: str, kq: str, kl: str) -> Stamp | None:
    """otlp_reader._stamp: None when the span has neither reading nor Lamport value for this event."""
    p, lts = d.get(kp), d.get(kl)
    if p is None and lts is None:
        return None
    u = d.get(ku)
    if u is None:
        unc = _SAT
    else:
        unc = int(u)
        if not 0 <= unc <= _SAT:
            raise ValueError(u)
    q = d.get(kq, "UNKNOWN")
    if q not in _QUALITIES:
        raise ValueError(q)
    return make_stamp(_int(p), unc, q, _int(lts))


def _sketch(raw: str | None) -> int | None:
    if raw is None:
        return None
    if len(raw) != 64:
        raise ValueError(raw)
    return int(raw, 16)


def _sends(chunk: str) -> tuple[tuple[tuple[int, int | None, int | None], ...], int] | None:
    """The span's send.* arrays as (lts, ptp, u) triples, and how many tempotrace arrays the span has;
    None when an array has a shape we do not read."""
    arrays: dict[str, list[int]] = {}
    found = _ARRAY.findall(chunk)
    for key, raw in found:
        # Only all-int arrays, wanted or not: the JSON path converts every element of every tempotrace array.
        if key in _SCALAR_FIELDS or _ARRAY_INT.match(raw) is None:
            return None
        if key in _ARRAY_FIELDS:
            arrays[key] = [int(x) for x in _INTS.findall(raw)]
    lts = arrays.get(S.SEND_LTS)
    if not lts:
        return (), len(found)
    ptp = arrays.get(S.SEND_PTP_NS, [])
    unc = arrays.get(S.SEND_UNCERTAINTY_NS, [])
    sends = tuple((v, ptp[i] if i < len(ptp) else None, unc[i] if i < len(unc) else None) for i, v in enumerate(lts))
    return sends, len(found)


def parse_line_fast(text: str, line: int, owns: Any = None) -> list[SpanRecord] | None:
    """Records of one eligible line, or None (not eligible / not valid: use the JSON path).

    ``owns``, when given, says from the trace id which spans this worker wants:
    the others are skipped before any work is spent on them."""
    if (
        "\\" in text
        or not text.startswith('{"resourceSpans":[{"resource":')
        or not text.endswith(_LINE_END)
        or text.count('"resource":') != 1
        or '"events":' in text
        or '"links":' in text
    ):
        return None
    chunks = text.split(_SPAN_MARK)
    host_match = _RESOURCE_HOST.search(chunks[0].split('"scopeSpans":', 1)[0])  # the resource's, not a scope's
    resource_host = host_match.group(1) if host_match else None
    scalar, head_match, clean = _SCALAR.findall, _HEAD.match, _BAD.isdisjoint
    out = []
    try:
        for chunk in chunks[1:]:
            cut = chunk.find('"scope":')
            if cut >= 0:  # the next scope's header follows this span: it belongs to no span
                chunk = chunk[:cut]
            if owns is not None and not owns(chunk[:32]):
                continue
            head = head_match(chunk)
            if head is None:
                return None
            found = scalar(chunk)
            marks = chunk.count(_ATTR_MARK)
            sends: tuple[tuple[int, int | None, int | None], ...] = ()
            if len(found) != marks:  # arrays, or an attribute shape we do not read
                arrays = _sends(chunk) if '"arrayValue":' in chunk else None
                if arrays is None or len(found) + arrays[1] != marks:
                    return None
                sends = arrays[0]
            d = dict(found)
            if not clean(d):
                return None
            trace_id, span_id, parent, name, kind_s, start, end = head.groups()
            if parent is None and '"parentSpanId":' in chunk:
                return None  # a parent id elsewhere than the exporter puts it
            if len(trace_id) != 32 or len(span_id) != 16 or (parent is not None and len(parent) != 16):
                return None  # base64 ids or odd sizes: the JSON path normalises them
            int(trace_id, 16), int(span_id, 16)
            if parent:
                int(parent, 16)
            start_stamp = _stamp(d, _PTP, _UNC, _QUAL, _LTS)
            out.append(SpanRecord(
                trace_id.lower(), span_id.lower(), (parent or "").lower(), name, int(kind_s),
                d.get(_HOST) or resource_host or "?",
                _NO_STAMP if start_stamp is None else start_stamp,
                _stamp(d, _EPTP, _EUNC, _EQUAL, _ELTS),
                int(start), int(end),
                _sketch(d.get(_SKETCH)), _int(d.get(_RANK)), d.get(_CLOCK, ""), d.get(_PROFILE, ""),
                sends,
                _stamp(d, _RPTP, _RUNC, _RQUAL, _RLTS), _sketch(d.get(_RSKETCH)), _int(d.get(_RECV)),
                line,
            ))
    except ValueError:
        return None
    return out
