"""The columnar engine's plain lane (analysis/plainlane.py; spec/analysis.md §5.6): parts of spans with nothing
but ids, times and a stamps text are counted a batch at a time from arrays, and the report is the reference's.
Drawn here: HTTP-style traces made with the real SDK and propagator (honest and lying clocks), their lines
interleaved, delivered again (a span twice in a part; a trace's later part, remembered or forgotten), torn, read
with windows that split traces (a receive span in a part without its client) and dedup horizons shorter than the
hop horizon, nothing or a few spans kept. A difference is the lane's: the reference is the per-span engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tempotrace_sdk.analysis import analyze
from tempotrace_sdk.analysis.analyzer import Analyzer
from tempotrace_sdk.analysis.inputs import expand
from tempotrace_sdk.analysis.reader import TraceReader

from .enginegen import http_trace
from .parquetgen import comparable, converted

pytest.importorskip("pyarrow")


@st.composite
def plain_input(draw: st.DrawFn) -> tuple[list[str], dict[str, Any]]:
    """Two to four HTTP traces' lines, maybe shuffled, some again later, one perhaps torn; the options."""
    lines = [ln for _ in range(draw(st.integers(2, 4))) for ln in draw(http_trace())[0]]
    if draw(st.booleans()):
        lines = draw(st.permutations(lines))
    for _ in range(draw(st.integers(0, 3))):
        lines.append(draw(st.sampled_from(lines)))
    if draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(lines) - 1))
        lines[at] = lines[at][: max(1, len(lines[at]) // 2)]
    options = {"window_spans": draw(st.sampled_from([1, 3, 7, 40, 100_000])),
               "dedup_spans": draw(st.sampled_from([0, 5, 1_000_000])),
               "keep": draw(st.sampled_from([0, 0, 3]))}
    return lines, options


def _lane(path: str, **options: Any) -> tuple[dict[str, Any], int]:
    """The columnar engine's report, and how many parts its lane counted from arrays (engine.run's wiring)."""
    analyzer = Analyzer(window_spans=options["window_spans"], keep=options["keep"],
                        dedup_spans=options["dedup_spans"], batch_edges=True, source=path)
    analyzer.report.inputs = 1
    reader = TraceReader(expand([path]), analyzer.report, columnar=True, plain=True)
    analyzer.add_batches(reader.batches())
    report = analyzer.finish()
    assert analyzer.lane is not None
    return comparable(report.to_dict()), analyzer.lane.counted


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                HealthCheck.too_slow, HealthCheck.data_too_large])
@given(drawn=plain_input())
def test_the_plain_lane_gives_the_reference_report(drawn: tuple[list[str], dict[str, Any]], tmp_path: Path) -> None:
    lines, options = drawn
    path = tmp_path / "plain.jsonl"
    path.write_text("\n".join(lines) + "\n")
    want = comparable(analyze(str(path), engine="reference", **options).to_dict())
    got = comparable(analyze(str(path), engine="columnar", **options).to_dict())
    assert got == want, "the columnar engine (its plain lane) differs from the reference"
    split = comparable(analyze(str(path), engine="columnar", jobs=2, **options).to_dict())
    assert split == want, "the columnar engine split in two partitions differs from the reference"
    table = converted([str(path)], str(tmp_path / "plain.parquet"))
    from_table = comparable(analyze(table, engine="columnar", **options).to_dict())
    assert from_table == want, "the columnar engine reading the span table (its plain lane) differs from the reference"


def test_the_lane_counts_http_parts_itself(tmp_path: Path) -> None:
    """Not a lane that hands everything back: on HTTP traces with nothing kept it counts the parts itself, from the
    OTLP JSON and from the span table converted from it (and the report is still the reference's)."""
    from .enginegen import _http

    lines = _http({"h0": "sim:ptp", "h1": "sim:liar", "h2": "sim:ntp"}, 3, 7)
    path = tmp_path / "http.jsonl"
    path.write_text("\n".join(lines) + "\n")
    options = {"window_spans": 100_000, "dedup_spans": 1_000_000, "keep": 0}
    report, counted = _lane(str(path), **options)
    assert counted >= 3
    assert report == comparable(analyze(str(path), engine="reference", **options).to_dict())
    assert report["hops"]["total"] > 0 and report["edges"]["total"] > 0
    from_table, counted = _lane(converted([str(path)], str(tmp_path / "http.parquet")), **options)  # a span table's
    assert counted >= 3 and from_table == report


def _edited(lines: list[str], edit: Any) -> list[str]:
    """The lines with ``edit(span, attributes by key, spans by id)`` applied to every span."""
    import json

    docs = [json.loads(ln) for ln in lines]
    spans = [sp for d in docs for rs in d["resourceSpans"] for ss in rs["scopeSpans"] for sp in ss["spans"]]
    by_id = {sp["spanId"]: sp for sp in spans}
    for sp in spans:
        edit(sp, {a["key"]: a for a in sp.get("attributes", [])}, by_id)
    return [json.dumps(d, separators=(",", ":")) for d in docs]


def _counters(stamps: str) -> tuple[int, int]:
    """A stamps text's start and end Lamport values (semantic-conventions §1.4: the end's is a delta)."""
    tokens = stamps.split(" ")
    start = int(tokens[0][1:].split(",")[0])
    end = next(t for t in tokens if t.startswith("e"))
    return start, start + int(end[1:].split(",")[0])


def _text(attrs: dict[str, Any]) -> str:
    return str(attrs["tempotrace.stamps"]["value"]["stringValue"])


def test_what_only_odd_spans_show_is_counted_as_the_reference_counts_it(tmp_path: Path) -> None:
    """Three things drawn traces leave out, each with nothing kept: a child whose end counter equals its
    parent's (a broken counter: no end edge, §1.2), a client span whose policy said degrade (its hop's send is
    degraded, so physics is silent on it), and a rank whose only spans are plain ones (the hang report has it
    as seen, not as a rank with no span in the input)."""
    from .enginegen import _http
    from .otlpgen import line
    from .torchgen import TorchJob

    def broken_and_degraded(sp: dict[str, Any], attrs: dict[str, Any], by_id: dict[str, Any]) -> None:
        if sp["name"] == "compute":  # its end counter made its parent's
            parent = {a["key"]: a for a in by_id[sp["parentSpanId"]]["attributes"]}
            start, _ = _counters(_text(attrs))
            _, parent_end = _counters(_text(parent))
            tokens = _text(attrs).split(" ")
            tokens = [f"e{parent_end - start}" + t[t.index(","):] if t.startswith("e") else t for t in tokens]
            attrs["tempotrace.stamps"]["value"]["stringValue"] = " ".join(tokens)
        elif sp["kind"] == 3:
            sp["attributes"].append({"key": "tempotrace.policy.verdict", "value": {"stringValue": "degrade"}})

    http = _edited(_http({"h0": "sim:ptp", "h1": "sim:ptp", "h2": "sim:ntp"}, 2, 11), broken_and_degraded)
    job = TorchJob(ranks=3, steps=1, collectives=1)
    torch_lines = [line(spans, {"tempotrace.rank": r, "tempotrace.job_id": "job-a", "tempotrace.restart": 0})
                   for r, spans in job.spans().items() if r != 2]  # rank 2 left no torch span ...
    plain = line([{"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "data.load", "kind": 1,
                   "startTimeUnixNano": "1799999970000000000", "endTimeUnixNano": "1799999970000100000",
                   "attributes": [{"key": "tempotrace.stamps", "value": {"stringValue": "s1,0 e1"}},
                                  {"key": "tempotrace.host", "value": {"stringValue": "node2"}}]}],
                 {"tempotrace.rank": 2, "tempotrace.job_id": "job-a", "tempotrace.restart": 0})  # ... but this
    path = tmp_path / "odd.jsonl"
    path.write_text("\n".join([*http, *torch_lines, plain]) + "\n")
    options = {"window_spans": 100_000, "dedup_spans": 1_000_000, "keep": 0}
    want = comparable(analyze(str(path), engine="reference", **options).to_dict())
    got, counted = _lane(str(path), **options)
    assert counted >= 3
    assert got == want
    assert want["edges"]["physics_silent"].get("policy_degrade", 0) > 0
    (group,) = [g for g in want["hang"]["groups"] if g["group"] == "0-2"]
    assert group["no_spans_in_group"]["ranks"] == [2] and group["no_spans_in_input"] == []


def test_a_queued_sender_takes_its_waiting_receiver_before_the_horizon_gives_it_up(tmp_path: Path) -> None:
    """A receive span read a hop horizon before its client span, in a part of its own: it waits (the reference's
    senders decide it). The client's part is plain and the lane queues it; the sweep that completes it must count
    the queue before it gives up the receivers waiting since beyond the horizon, or the hop loses its sender."""
    from .otlpgen import line

    def span(trace: str, sid: str, parent: str, kind: int, stamps: str) -> dict[str, Any]:
        return {"traceId": trace, "spanId": sid, "parentSpanId": parent, "name": "s", "kind": kind,
                "startTimeUnixNano": "1799999970000000000", "endTimeUnixNano": "1799999970000100000",
                "attributes": [{"key": "tempotrace.stamps", "value": {"stringValue": stamps}},
                               {"key": "tempotrace.host", "value": {"stringValue": "h"}}]}

    window = 4096  # the hop horizon too
    trace = "77" * 16
    receiver = span(trace, "00000000000000aa", "00000000000000bb", 2, "s5,0 e1 r3,-1000,220,0,0,0,1")
    client = span(trace, "00000000000000bb", "", 3, "s2,0 e3 x1,500")
    fillers = [span(f"{k + 1:032x}", f"{k + 1:016x}", "", 1, "s1,0 e1") for k in range(2 * window + 600)]
    spans = [receiver, *fillers[:window - 1], client, *fillers[window - 1:]]
    lines = [line(spans[i:i + 512]) for i in range(0, len(spans), 512)]
    path = tmp_path / "late-client.jsonl"
    path.write_text("\n".join(lines) + "\n")
    options = {"window_spans": window, "dedup_spans": 0, "keep": 0}  # (dedup 0: the client's part is new)
    want = comparable(analyze(str(path), engine="reference", **options).to_dict())
    assert want["hops"] == {"total": 1, "matched": 1}
    got, counted = _lane(str(path), **options)
    assert counted > window
    assert got == want


def _span(trace: str, sid: str, parent: str = "", kind: int = 1, stamps: str | None = "s1,0 e1") -> dict[str, Any]:
    """One span of one host, with a stamps text (plain) or without (its line goes to the records)."""
    attrs = [{"key": "tempotrace.host", "value": {"stringValue": "h"}}]
    if stamps is not None:
        attrs.append({"key": "tempotrace.stamps", "value": {"stringValue": stamps}})
    return {"traceId": trace, "spanId": sid, "parentSpanId": parent, "name": "s", "kind": kind,
            "startTimeUnixNano": "1799999970000000000", "endTimeUnixNano": "1799999970000100000",
            "attributes": attrs}


@pytest.mark.parametrize("jobs", [1, 2])
def test_job_keys_past_the_cap_are_told_apart_in_the_order_parts_complete(tmp_path: Path, jobs: int) -> None:
    """The job table tells MAX_JOBS keys apart, the first ones named, and counts the rest together (jobs.py): which
    those are depends on the order parts complete in, plain or not, and on the order each partition took them."""
    from tempotrace_sdk.analysis.jobs import MAX_JOBS

    from .otlpgen import line

    lines = [line([_span(f"{k + 2:032x}", f"{k + 2:016x}", stamps=None if k % 3 == 2 else "s1,0 e1")],
                  {"tempotrace.job_id": f"j{k:04d}"}) for k in range(MAX_JOBS + 200)]
    path = tmp_path / "jobs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    options = {"keep": 0, "jobs": jobs}
    want = comparable(analyze(str(path), engine="reference", **options).to_dict())
    assert want["jobs"]["beyond_limit_spans"] == 200
    assert comparable(analyze(str(path), engine="columnar", **options).to_dict()) == want


def test_a_sender_remembered_past_the_horizon_is_as_if_forgotten(tmp_path: Path) -> None:
    """A client span analysed more than a hop horizon before its receive span is not its sender, whether or not
    the memory has let go of it yet (which depends on what else it holds, in what order): the receive waits, and
    the client delivered again within the horizon matches it (memory.py; spec/analysis.md §5.2)."""
    import json

    from .otlpgen import line

    def records_line(span: dict[str, Any]) -> str:  # (a Resource without spans: the line is read as records)
        doc = json.loads(line([span]))
        doc["resourceSpans"].append({"resource": {"attributes": []}, "scopeSpans": []})
        return json.dumps(doc, separators=(",", ":"))

    fillers = iter(range(1, 10_000))

    def filler() -> str:
        k = next(fillers)
        return line([_span(f"{k:032x}", f"{k:016x}")])

    trace, other, horizon = "77" * 16, "88" * 16, 4096
    client = _span(trace, "00000000000000bb", kind=3, stamps="s2,0 e3 x1,500")
    lines = [filler() for _ in range(101)]
    lines += [line([client]), records_line(_span(other, "00000000000000cc", kind=3, stamps="s2,0 e3 x1,500"))]
    lines += [filler() for _ in range(horizon + 1)]
    lines.append(line([_span(trace, "00000000000000aa", "00000000000000bb", 2, "s5,0 e1 r3,-1000,220,0,0,0,1")]))
    lines += [filler() for _ in range(39)] + [line([client])] + [filler() for _ in range(200)]
    path = tmp_path / "stale.jsonl"
    path.write_text("\n".join(lines) + "\n")
    options = {"window_spans": 32, "dedup_spans": 0, "keep": 0}
    want = comparable(analyze(str(path), engine="reference", **options).to_dict())
    assert want["hops"] == {"total": 1, "matched": 1}
    for engine, jobs in (("columnar", 1), ("reference", 2), ("columnar", 2)):
        got = comparable(analyze(str(path), engine=engine, jobs=jobs, **options).to_dict())
        assert got == want, (engine, jobs)


def test_job_keys_are_taken_in_the_order_parts_complete_not_the_order_they_began(tmp_path: Path) -> None:
    """Two parts counted in one batch, the later-begun one completed first (a span of its trace came a window
    after it): its job key is the one the full table still takes, as one part after another would have it. The
    two lie in two decode blocks, the earlier-begun one's first."""
    from tempotrace_sdk.analysis.jobs import MAX_JOBS
    from tempotrace_sdk.analysis.reader import BLOCK_LINES

    from .otlpgen import line

    window, n = 64, iter(range(1, 20_000))

    def one(job: str, trace: str | None = None) -> str:
        k = next(n)
        return line([_span(trace or f"{k:032x}", f"{k:016x}")], {"tempotrace.job_id": job})

    lines = [one(f"j{k:04d}") for k in range(MAX_JOBS - 1)]  # positions 0..1022: the table one short of full
    at = BLOCK_LINES - 1  # (a line a span: the first block's last line)
    assert at % 4 == 3
    lines += [one("j0000") for _ in range(at - len(lines))]
    # sweeps come every window // 16 = 4 positions: the first part (at) completes at the sweep at at + 65, after
    # the second (at + 1) has, at at + 65, by its trace's next span
    first, second = "a1" * 16, "b2" * 16
    lines += [one("first", first), one("second", second)]
    lines += [one("j0000") for _ in range(at + 65 - len(lines))] + [one("second", second)]
    lines += [one("j0000") for _ in range(300)]
    path = tmp_path / "order.jsonl"
    path.write_text("\n".join(lines) + "\n")
    options = {"window_spans": window, "keep": 0}
    want = comparable(analyze(str(path), engine="reference", **options).to_dict())
    named = {row["job_id"] for row in want["jobs"]["by_job"]}
    assert "second" in named and "first" not in named
    assert comparable(analyze(str(path), engine="columnar", **options).to_dict()) == want


def test_a_trace_completing_twice_between_sweeps_is_counted_once(tmp_path: Path) -> None:
    """A partition's sweeps come with its own spans' positions; another partition's spans move the positions on
    without one. So a trace's part can complete while its previous part is still queued: the queue is counted
    first, and the later part is the same trace's (one trace, two parts), not a new one."""
    from .otlpgen import line

    mine_a, mine_b, theirs = "00" * 15 + "02", "00" * 15 + "04", "00" * 15 + "01"  # shard 0 of 2 owns the first two
    others = iter(range(1, 1000))

    def unowned(n: int) -> list[dict[str, Any]]:
        return [_span(theirs, f"{next(others):016x}") for _ in range(n)]

    spans = [_span(mine_a, "00000000000000a1"), *unowned(30), _span(mine_b, "00000000000000b1"),
             _span(mine_a, "00000000000000a2"), *unowned(31), _span(mine_a, "00000000000000a3")]
    path = tmp_path / "twice.jsonl"
    path.write_text(line(spans) + "\n")
    options = {"window_spans": 32, "keep": 0, "jobs": 2}
    want = comparable(analyze(str(path), engine="reference", **options).to_dict())
    assert (want["traces"], want["trace_parts"]) == (3, 6)  # (the other partition's trace: two parts)
    assert comparable(analyze(str(path), engine="columnar", **options).to_dict()) == want
