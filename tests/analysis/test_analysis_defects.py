"""The six defects of issue 11, each shown on the smallest trace that has it (spec/analysis.md §1.2, §5,
§6.1; spec/policy.md §4). Every test here failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tempotrace_sdk.analysis import TraceFileError, analyze_file

from .otlpgen import TAI_UTC_NS, line, span, stamp
from .tracegen import write_trace

T = 1_800_000_037_000_000_000  # a TAI reading; its UTC span time is T - 37 s


def _write(tmp_path: Path, *lines: str, name: str = "t.jsonl") -> str:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_an_async_child_ending_in_its_parents_clock_tick_accuses_nobody(tmp_path: Path) -> None:
    """§1.2, defect 1: a coarse clock (10 µs ticks, an honest ±10 µs bound, an honest Lamport counter).
    The async child ends 3 µs after its parent, inside one tick: equal end times, and end.lts says the
    child ended last. No child_end edge may be asserted, and no clock accused; a synchronous sibling
    (end.lts before the parent's) still gives one."""
    u = 10_000
    parent = span(1, 0xA1, start=T - TAI_UTC_NS, end=T + 100_000 - TAI_UTC_NS,
                  attrs={**stamp("", T, u, lts=1), **stamp("end.", T + 100_000, u, lts=5)})
    leftover = span(1, 0xB2, 0xA1, start=T + 20_000 - TAI_UTC_NS, end=T + 100_000 - TAI_UTC_NS,
                    attrs={**stamp("", T + 20_000, u, lts=2), **stamp("end.", T + 100_000, u, lts=6)})
    sync = span(1, 0xC3, 0xA1, start=T + 30_000 - TAI_UTC_NS, end=T + 60_000 - TAI_UTC_NS,
                attrs={**stamp("", T + 30_000, u, lts=3), **stamp("end.", T + 60_000, u, lts=4)})
    d = analyze_file(_write(tmp_path, line([parent, leftover, sync]))).to_dict()
    assert d["faults"] == [] and d["lying_hosts"] == [] and d["edges"]["wrong_total"] == 0
    assert d["edges"]["by_kind"]["child_end"] == 1  # the synchronous child's, not the leftover's


def test_the_naive_view_compares_like_with_like(tmp_path: Path) -> None:
    """§6.1, defect 2: a stamped parent (TAI) and an unstamped child 5 µs later (only its UTC span time)
    are in order; the naive view must not see an inversion 37 s wide. A child that really started
    5 µs before its parent (a plain tracer's inversion) is still counted."""
    parent = span(1, 0xA1, start=T - TAI_UTC_NS, attrs=stamp("", T, lts=1))
    later = span(1, 0xB2, 0xA1, start=T - TAI_UTC_NS + 5_000, host=None)
    earlier = span(2, 0xB3, 0xA2, start=T - TAI_UTC_NS - 5_000, host=None)
    parent2 = span(2, 0xA2, start=T - TAI_UTC_NS, attrs=stamp("", T, lts=1))
    d = analyze_file(_write(tmp_path, line([parent, later]), line([parent2, earlier]))).to_dict()
    assert d["edges"]["by_kind"] == {"parent_child": 2}
    assert d["edges"]["naive_inversions"] == 1


def _hop(verdict: str) -> list[str]:
    """A client on host a and a server on host b whose clock reads 50 µs early while claiming ±220 ns."""
    client = span(7, 0xC1, kind=3, host="a", attrs={**stamp("", T, lts=2), "tempotrace.send.lts": [3],
                                                    "tempotrace.send.ptp_ns": [T + 1_000],
                                                    "tempotrace.send.uncertainty_ns": [220]})
    server = span(7, 0x51, 0xC1, kind=2, host="b", attrs={
        **stamp("", T - 50_000, lts=5), **stamp("remote.", T + 1_000, lts=3), "tempotrace.recv.lts": 4,
        "tempotrace.policy.verdict": verdict, "tempotrace.policy.reason": "uncertainty_ns 220 > 100"})
    return [line([client]), line([server])]


def test_a_degrade_verdict_keeps_a_span_out_of_physics(tmp_path: Path) -> None:
    """spec/policy.md §4 = spec/analysis.md §2.1, defect 3: a span whose policy verdict is ``degrade``
    is never ordered by physical time; Lamport decides its hop. With ``flag`` physics still speaks."""
    flagged = analyze_file(_write(tmp_path, *_hop("flag"), name="f.jsonl")).to_dict()
    # the control: physics uses (and catches) the stamp on both edges (parent -> child, and the hop)
    assert flagged["edges"]["wrong"]["physics"] == 2
    d = analyze_file(_write(tmp_path, *_hop("degrade"), name="d.jsonl")).to_dict()
    assert d["edges"]["wrong_total"] == 0 and d["faults"] == []
    assert d["edges"]["decided"] == {"physics": 0, "lamport": 2, "svc": 0, "derived": 0, "undecided": 0}
    assert d["edges"]["physics_silent"] == {"policy_degrade": 2}
    assert d["degraded_spans"] == 1


def test_a_duplicate_after_its_trace_was_analysed_is_counted_once(tmp_path: Path) -> None:
    """§5.2, defect 4: at-least-once delivery, the whole export repeated, a window of 40 spans: the
    second copy arrives long after its traces were analysed; the counts are those of one copy."""
    path = tmp_path / "t.jsonl"
    write_trace(str(path), {"coord": "sim:ptp", "w1": "sim:ptp", "w2": "sim:liar", "w3": "sim:ptp"}, steps=3)
    doubled = tmp_path / "twice.jsonl"
    doubled.write_text(path.read_text() * 2)
    once = analyze_file(str(path), window_spans=40).to_dict()
    twice = analyze_file(str(doubled), window_spans=40).to_dict()
    assert twice["duplicate_spans"] == once["spans"] and twice["spans"] == 2 * once["spans"]
    for key in ("edges", "hops", "faults", "traces", "wrong_by_pair", "unresolved_parents"):
        assert twice[key] == once[key], key


def _sorted(text: str) -> str:
    """The same line, compact as the exporter writes it, with every object's keys sorted."""
    return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))


def test_an_export_with_its_keys_in_another_order_reads_the_same(tmp_path: Path) -> None:
    """§5, defect 5: the same export with every object's keys sorted is the same trace."""
    path = tmp_path / "t.jsonl"
    write_trace(str(path), {"coord": "sim:ptp", "w1": "sim:ntp", "w2": "sim:liar"}, steps=2)
    lines = path.read_text().splitlines()
    resorted = tmp_path / "sorted.jsonl"
    resorted.write_text("\n".join([*lines[:-1], _sorted(lines[-1])]) + "\n")
    everything = tmp_path / "all-sorted.jsonl"
    everything.write_text("\n".join(_sorted(x) for x in lines) + "\n")
    want = analyze_file(str(path)).summary()
    assert analyze_file(str(resorted)).summary() == want
    assert analyze_file(str(everything)).summary() == want


def test_attributes_that_are_not_a_list_are_refused_either_way(tmp_path: Path) -> None:
    """§5, defect 5: ``"attributes": "abc"`` is not OTLP: the span is refused whatever its key order."""
    bad = span(1, 0xA1, attrs=stamp("", T, lts=1))
    bad["attributes"] = "abc"
    good = span(2, 0xA2, attrs=stamp("", T, lts=1))
    for text in (line([bad]), _sorted(line([bad]))):
        path = _write(tmp_path, line([good]), text)
        with pytest.raises(TraceFileError) as info:
            analyze_file(path, strict=True)
        assert info.value.line == 2 and "attributes" in info.value.reason
        d = analyze_file(path).to_dict()
        assert d["bad"]["spans"] == 1 and d["spans"] == 1  # the line is JSON: only its span is refused


BAD_VALUES = [
    ("ts_source GPS", {"tempotrace.ts_source": "GPS"}, "tempotrace.ts_source"),
    ("tenant_id 99", {"tempotrace.tenant_id": 99}, "tempotrace.tenant_id"),
    ("remote tenant 16", {"tempotrace.remote.tenant_id": 16, "tempotrace.remote.lts": 1},
     "tempotrace.remote.tenant_id"),
    ("send arrays of different lengths", {"tempotrace.send.lts": [1, 2], "tempotrace.send.ptp_ns": [5],
                                          "tempotrace.send.uncertainty_ns": [220, 220]}, "tempotrace.send.ptp_ns"),
    ("send.ptp_ns without send.lts", {"tempotrace.send.ptp_ns": [5]}, "tempotrace.send.lts"),
    ("a policy verdict no policy gives", {"tempotrace.policy.verdict": "maybe"}, "tempotrace.policy.verdict"),
    ("retention of 0 days", {"tempotrace.policy.retention_days": 0}, "tempotrace.policy.retention_days"),
]


@pytest.mark.parametrize(("name", "attrs", "field"), BAD_VALUES, ids=[b[0] for b in BAD_VALUES])
def test_values_the_analysis_does_not_read_are_checked_too(tmp_path: Path, name: str, attrs: dict[str, object],
                                                           field: str) -> None:
    """§5, defect 6: every tempotrace.* attribute in the value table keeps its rule, read or not: the
    span is refused (counted with path:line), or the whole input with --strict."""
    good = span(1, 0xA1, attrs=stamp("", T, lts=1))
    bad = span(1, 0xB2, 0xA1, attrs={**stamp("", T + 1_000, lts=2), **attrs})
    path = _write(tmp_path, line([good, bad]))
    with pytest.raises(TraceFileError) as info:
        analyze_file(path, strict=True)
    assert field in info.value.reason and info.value.line == 1, name
    d = analyze_file(path).to_dict()
    assert d["spans"] == 1 and d["bad"]["spans"] == 1 and d["unresolved_parents"] == 0
    (first,) = d["bad"]["first"]
    assert first["line"] == 1 and field in first["reason"] and first["path"] == path
