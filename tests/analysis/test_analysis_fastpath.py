"""The reader's regex fast path gives exactly the JSON path's records, and steps
aside for any line it does not fully understand (spec/analysis.md §5)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tempotrace_sdk.analysis import iter_spans
from tempotrace_sdk.analysis.fastpath import parse_line_fast
from tempotrace_sdk.analysis.otlp_reader import span_from_dict

from .tracegen import write_trace

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.bench_analysis import generate


def _slow(line: str) -> list:  # type: ignore[type-arg]
    doc = json.loads(line)
    out = []
    for rs in doc["resourceSpans"]:
        host = None
        for kv in rs.get("resource", {}).get("attributes", ()):
            if kv["key"] in ("tempotrace.host", "host.name"):
                host = kv["value"].get("stringValue")
        for ss in rs.get("scopeSpans", ()):
            out += [span_from_dict(s, host, 1) for s in ss.get("spans", ())]
    return out


def test_real_exporter_lines_take_the_fast_path_and_agree(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_trace(str(path), {"c": "sim:ptp", "w1": "sim:ntp", "w2": "sim:liar", "w3": "sim:unsynced"}, steps=1)
    lines = path.read_text().splitlines()
    fast = [parse_line_fast(line, 1) for line in lines]
    assert all(f is not None for f in fast), "the exporter's own lines should qualify"
    assert fast == [_slow(line) for line in lines]
    assert list(iter_spans(str(path))) == list(iter_spans(str(path), fast_path=False))


def test_generated_benchmark_trace_agrees(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    generate(str(path), 3000)
    assert list(iter_spans(str(path))) == list(iter_spans(str(path), fast_path=False))


def test_several_scopes_in_one_line_agree(one_line: str) -> None:
    doc = json.loads(one_line)
    scopes = doc["resourceSpans"][0]["scopeSpans"]
    extra = json.loads(json.dumps(scopes[0]))
    extra["scope"] = {"name": "other", "attributes": [{"key": "tempotrace.host", "value": {"stringValue": "nope"}}]}
    for span in extra["spans"]:
        span["spanId"] = "00000000000000ff"
        span["attributes"] = [kv for kv in span["attributes"] if kv["key"] != "tempotrace.host"]
    scopes.append(extra)
    scopes.insert(0, json.loads(json.dumps(extra)))
    line = json.dumps(doc, separators=(",", ":"))
    fast = parse_line_fast(line, 1)
    assert fast is not None and fast == _slow(line) and len(fast) == 3
    assert "nope" not in {r.host for r in fast}  # a scope's attributes are not the resource's


def _edit(line: str, old: str, new: str) -> str:
    assert old in line
    return line.replace(old, new, 1)


@pytest.fixture(scope="module")
def one_line(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("fp") / "t.jsonl"
    write_trace(str(path), {"c": "sim:ptp", "w1": "sim:ptp"}, steps=1)
    return next(line for line in path.read_text().splitlines() if '"tempotrace.remote.lts"' in line)


STEP_ASIDE = [
    ("escaped quote in a name", lambda s: _edit(s, '"name":"serve"', '"name":"se\\"rve"')),
    ("span events present",
     lambda s: _edit(s, '"status":{}', '"events":[{"name":"e","timeUnixNano":"1"}],"status":{}')),
    ("links present", lambda s: _edit(s, '"status":{}', '"links":[],"status":{}')),
    ("a tempotrace attribute as a double", lambda s: _edit(s, '"tempotrace.rank","value":{"intValue":"1"}',
                                                            '"tempotrace.rank","value":{"doubleValue":1.0}')
     if '"tempotrace.rank"' in s else _edit(s, '{"key":"tempotrace.lts","value":{"intValue":"',
                                           '{"key":"tempotrace.x","value":{"doubleValue":1.5}},'
                                           '{"key":"tempotrace.lts","value":{"intValue":"')),
    ("uncertainty out of range", lambda s: _edit(s, '"tempotrace.uncertainty_ns","value":{"intValue":"220"}',
                                                  '"tempotrace.uncertainty_ns","value":{"intValue":"99999"}')),
    ("pretty-printed JSON", lambda s: json.dumps(json.loads(s), indent=1)),
    ("line cut short (exporter killed mid-write)", lambda s: s[: s.rindex('"status"')]),
    ("an int attribute written as a string", lambda s: _edit(s, '"tempotrace.lts","value":{"intValue":"',
                                                              '"tempotrace.lts","value":{"stringValue":"')),
    ("a quality written as an int", lambda s: _edit(s, '"tempotrace.clk_quality","value":{"stringValue":"OK"}',
                                                     '"tempotrace.clk_quality","value":{"intValue":"1"}')),
    ("an unread int attribute that is not a number",
     lambda s: _edit(s, '"tempotrace.tenant_id","value":{"intValue":"0"}',
                     '"tempotrace.tenant_id","value":{"intValue":"x"}')),
    ("an unknown value kind", lambda s: _edit(s, '"tempotrace.lts","value":{"intValue":"',
                                               '"tempotrace.lts","value":{"itringValue":"')),
    ("a send.lts array holding a string", lambda s: _edit(s, '"tempotrace.uncertainty_ns","value":{"intValue":"',
                                                           '"tempotrace.send.lts","value":{"arrayValue":{"values":'
                                                           '[{"stringValue":"x"}]}}},'
                                                           '{"key":"tempotrace.uncertainty_ns","value":{"intValue":"')),
    ("a sketch of the wrong size", lambda s: _edit(s, '"tempotrace.svc_sketch","value":{"stringValue":"',
                                                    '"tempotrace.svc_sketch","value":{"stringValue":"00')),
]


@pytest.mark.parametrize(("name", "edit"), STEP_ASIDE, ids=[c[0] for c in STEP_ASIDE])
def test_fast_path_steps_aside(one_line: str, name: str, edit) -> None:  # type: ignore[no-untyped-def]
    line = edit(one_line)
    assert parse_line_fast(line, 1) is None, name


@pytest.mark.parametrize(("name", "edit"), STEP_ASIDE, ids=[c[0] for c in STEP_ASIDE])
def test_a_line_the_fast_path_refuses_gets_the_json_paths_verdict(
    one_line: str, name: str, edit, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    """Whatever the fast path steps aside from, the reader still answers exactly as the JSON path does."""
    path = tmp_path / "t.jsonl"
    path.write_text(edit(one_line) + "\n")

    def read(fast: bool) -> object:
        try:
            return list(iter_spans(str(path), fast_path=fast))
        except ValueError as err:
            return f"{type(err).__name__}: {err}"

    assert read(True) == read(False), name


def test_other_arrays_beside_the_send_arrays_agree(one_line: str) -> None:
    """§5: arrays the analysis does not read (a user's, an unread tempotrace one of ints) keep the fast
    path, and the records still equal the JSON path's."""
    extra = ('{"key":"user.tags","value":{"arrayValue":{"values":[{"stringValue":"a"},{"stringValue":"b"}]}}},'
             '{"key":"tempotrace.future.ids","value":{"arrayValue":{"values":[{"intValue":"7"},{"intValue":"8"}]}}},'
             '{"key":"tempotrace.send.lts","value":{"arrayValue":{"values":[{"intValue":"41"},{"intValue":"42"}]}}},'
             '{"key":"tempotrace.send.ptp_ns","value":{"arrayValue":{"values":[{"intValue":"9"}]}}},'
             '{"key":"tempotrace.lts","value":{"intValue":"')
    line = _edit(one_line, '{"key":"tempotrace.lts","value":{"intValue":"', extra)
    fast = parse_line_fast(line, 1)
    assert fast is not None and fast == _slow(line)
    assert any(r.sends == ((41, 9, None), (42, None, None)) for r in fast)



TOKENS = ['"', "}", "]", ",", "{", ":", "x", "-1", "0", "99999999999999999999", "65536", "UNKNOWN", "DEGRADED", "",
          " 5", "+5", "5_0", "0x10", "1.5", "a" * 64, "0" * 63 + "g", '{"intValue":"1"}', '"},{"key":"tempotrace.lts']
_VALUE = re.compile(r'"tempotrace\.[^"]+","value":\{"[a-zA-Z]+":"([^"]*)"')


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_edit_of_tempotrace_values_gets_the_same_answer_on_both_paths(
    one_line: str, tmp_path: Path, data: st.DataObject
) -> None:
    """§5: a writer's bad values (out of range, wrong type, not a number, a quote or brace inside)
    in up to three tempotrace attributes: both paths give equal records or the same error.

    Known gap, not covered here: the fast path checks the parts it reads, not that the rest of the line
    is JSON; a stray brace in the resource or a doubled comma between attributes can be read by it and
    refused (or read differently) by the JSON path."""
    line = one_line
    for _ in range(data.draw(st.integers(1, 3))):
        values = list(_VALUE.finditer(line))
        if not values:
            break
        m = data.draw(st.sampled_from(values))
        line = line[:m.start(1)] + data.draw(st.sampled_from(TOKENS)) + line[m.end(1):]
    path = tmp_path / "t.jsonl"
    path.write_text(line + "\n")

    def read(fast: bool) -> object:
        try:
            return list(iter_spans(str(path), fast_path=fast))
        except ValueError as err:
            return f"{type(err).__name__}: {err}"

    assert read(True) == read(False)
