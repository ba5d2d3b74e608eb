"""Both attribute sets (spec/semantic-conventions.md §1.2-§1.5): an export the previous processor wrote is
read as it was, the same spans in the current set give the same analysis, and a broken ``tempotrace.stamps``
refuses its span only, naming the attribute and the rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tempotrace_sdk import semconv as S
from tempotrace_sdk.analysis import TraceFileError, analyze_file, iter_spans
from tempotrace_sdk.stamptext import encode

from .otlpgen import kv, line, span

#: Written by the span processor of main at d544d5e (one attribute per field) through tests/analysis/tracegen.py:
#: four simulated hosts (coord PTP, w1 NTP, w2 unsynchronised, w3 the liar), one step: physics, Lamport and
#: SVC each decide edges, and two are wrong.
PREVIOUS = Path(__file__).with_name("data") / "previous_attributes.jsonl"

_QUALITY = {"OK": 0, "DEGRADED": 1, "UNKNOWN": 2}
_SOURCE = {"GTE": 0, "SW_GCC": 1, "CPU": 2}
#: What moves to the Resource (per process) in the current set.
_PER_PROCESS = (S.HOST, S.CLOCK, S.TENANT_ID)


def _value(v: dict[str, Any]) -> Any:
    if "intValue" in v:
        return int(v["intValue"])
    if "arrayValue" in v:
        return [_value(x) for x in v["arrayValue"].get("values", [])]
    return v.get("stringValue")


def _any(value: Any) -> dict[str, Any]:
    return kv("", value)["value"]  # type: ignore[no-any-return]


def _to_current(attrs: dict[str, Any], start_ns: int, end_ns: int) -> dict[str, Any]:
    """One span's previous attributes rewritten as the processor writes them now (what it would have written)."""
    quality = _QUALITY[attrs[S.CLK_QUALITY]]
    remote = None
    if S.REMOTE_LTS in attrs:
        remote = (attrs[S.REMOTE_PTP_NS], attrs[S.REMOTE_UNCERTAINTY_NS], _QUALITY[attrs[S.REMOTE_CLK_QUALITY]],
                  _SOURCE[attrs[S.REMOTE_TS_SOURCE]], attrs[S.REMOTE_TENANT_ID], attrs[S.REMOTE_LTS])  # fmt: skip
    arrays = (attrs.get(S.SEND_LTS, []), attrs.get(S.SEND_PTP_NS, []), attrs.get(S.SEND_UNCERTAINTY_NS, []))
    sends = [(lts, ptp, unc, quality) for lts, ptp, unc in zip(*arrays, strict=True)]
    text = encode(
        attrs[S.LTS], attrs[S.PTP_NS], attrs[S.UNCERTAINTY_NS], quality, _SOURCE[attrs[S.TS_SOURCE]], start_ns,
        (attrs[S.END_LTS], attrs[S.END_PTP_NS], attrs[S.END_UNCERTAINTY_NS], _QUALITY[attrs[S.END_CLK_QUALITY]]),
        end_ns, remote, attrs.get(S.RECV_LTS), bytes.fromhex(attrs[S.SVC_SKETCH]) if remote else None, sends,
    )  # fmt: skip
    kept = {k: v for k, v in attrs.items() if not k.startswith(S.PREFIX) or k in (S.RANK, S.CLOCK_PROFILE)}
    return {**kept, S.STAMPS: text, S.CLK_QUALITY: attrs[S.CLK_QUALITY], S.UNCERTAINTY_NS: attrs[S.UNCERTAINTY_NS]}


def _rewrite(src: Path, dst: Path) -> None:
    out = []
    for text in src.read_text().splitlines():
        doc = json.loads(text)
        for rs in doc["resourceSpans"]:
            moved: dict[str, Any] = {}
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    attrs = {a["key"]: _value(a["value"]) for a in sp["attributes"]}
                    moved.update({k: attrs[k] for k in _PER_PROCESS})
                    current = _to_current(attrs, int(sp["startTimeUnixNano"]), int(sp["endTimeUnixNano"]))
                    sp["attributes"] = [{"key": k, "value": _any(v)} for k, v in current.items()]
            rs["resource"]["attributes"] += [{"key": k, "value": _any(v)} for k, v in moved.items()]
        out.append(json.dumps(doc, separators=(",", ":")))
    dst.write_text("\n".join(out) + "\n")


def _comparable(report: Any) -> dict[str, Any]:
    out: dict[str, Any] = report.to_dict()
    out.pop("elapsed_s", None)
    out.pop("source", None)
    return out


def test_an_export_in_the_previous_attribute_set_is_read_whole() -> None:
    """Old exports exist: every span, stamp, hop and send of main's processor is read, nothing refused."""
    spans = list(iter_spans(str(PREVIOUS)))
    assert len(spans) == 41 and {s.host for s in spans} == {"coord", "w1", "w2", "w3"}
    assert all(s.start.ptp_ns and s.start.lts and s.end is not None and s.end.lts and s.sketch for s in spans)
    servers = [s for s in spans if s.remote is not None]
    assert len(servers) == 13 and all(s.recv_lts and s.remote_sketch for s in servers)
    assert sum(len(s.sends) for s in spans) == 13
    assert {s.clock_source for s in spans} == {"sim:ptp", "sim:ntp", "sim:unsynced", "sim:liar"}
    summary = analyze_file(str(PREVIOUS)).summary()
    assert (summary["spans"], summary["hops"], summary["hops_matched"], summary["bad_spans"]) == (41, 13, 13, 0)
    assert summary["physics"] and summary["lamport"] and summary["svc"] and summary["wrong"]


def test_the_same_spans_in_the_current_set_give_the_same_analysis(tmp_path: Path) -> None:
    """The current set loses nothing the analysis uses: records and report equal the previous set's, except
    what is no longer written (the sender's sketch, and sketches of spans that received no header)."""
    current = tmp_path / "current.jsonl"
    _rewrite(PREVIOUS, current)
    assert len(current.read_bytes()) < 0.6 * len(PREVIOUS.read_bytes())
    old, new = list(iter_spans(str(PREVIOUS))), list(iter_spans(str(current)))
    for a, b in zip(old, new, strict=True):
        assert (b.start, b.end, b.remote, b.recv_lts, b.sends, b.host, b.clock_source, b.clock) == \
            (a.start, a.end, a.remote, a.recv_lts, a.sends, a.host, a.clock_source, a.clock)  # fmt: skip
        assert b.remote_sketch is None
        assert b.sketch == a.sketch if b.remote is not None else (a.sketch | b.sketch) == a.sketch  # a subset
    assert _comparable(analyze_file(str(current))) == _comparable(analyze_file(str(PREVIOUS)))


def _stamped(text: str, **over: Any) -> str:
    attrs = {S.STAMPS: text, S.CLK_QUALITY: "OK", S.UNCERTAINTY_NS: 220, **over}
    return line([span(1, 2, attrs=attrs, host=None), span(1, 3, 2, attrs={S.STAMPS: "s9,0 e1"}, host=None)],
                resource={S.HOST: "node-r", S.CLOCK: "phc:/dev/ptp0"})


def test_a_stamped_span_takes_host_and_clock_from_its_resource(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(_stamped("s7,0,-5 e2,3 x1,10") + "\n")
    first, second = iter_spans(str(path))
    assert (first.host, first.clock_source) == ("node-r", "phc:/dev/ptp0")
    t0 = first.otel_start_ns + 37_000_000_000
    start = first.start
    assert (start.ptp_ns, start.lts, start.quality, start.uncertainty_ns) == (t0 - 5, 7, "OK", 220)
    assert first.end is not None and (first.end.ptp_ns, first.end.lts) == (first.otel_end_ns + 37_000_000_003, 9)
    assert first.sends == ((8, t0 - 5 + 10, 220),)
    # without clk_quality / uncertainty_ns: the start says nothing physical (UNKNOWN, saturated)
    assert (second.start.quality, second.start.uncertainty_ns) == ("UNKNOWN", 65535)


BAD = [
    ("a text that is not one", "hello", "tempotrace.stamps"),
    ("an end lts below 0", "s7,0 e-8", "lts must be 0"),
    ("a quality outside the enum", "s7,0 e1,0,220,7", "e<dlts>"),
]


@pytest.mark.parametrize(("name", "text", "why"), BAD, ids=[b[0] for b in BAD])
def test_a_broken_stamps_text_refuses_its_span_only(tmp_path: Path, name: str, text: str, why: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(_stamped(text) + "\n")
    report = analyze_file(str(path))
    assert (report.bad_spans, report.spans) == (1, 1), name  # the other span of the line is kept
    with pytest.raises(TraceFileError) as info:
        analyze_file(str(path), strict=True)
    assert "tempotrace.stamps" in info.value.reason and why in info.value.reason, info.value.reason
