"""torch spans as input: their values go through the one table of value rules (values.SPAN_RULES), and a
run split by trace (``--jobs``, ``--engine dask``) reports the collectives and messages one process does
(spec/analysis.md §5.1, §5.3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tempotrace_sdk.analysis import analyze
from tempotrace_sdk.analysis.dask_engine import analyze_dask
from tempotrace_sdk.analysis.engine import Options
from tempotrace_sdk.analysis.inputs import expand
from tempotrace_sdk.analysis.merge import merge_reports
from tempotrace_sdk.analysis.values import SPAN_RULES

from .torchgen import op_span, p2p_span, write

MS = 1_000_000

#: (extra attributes, the attribute the refusal names): each span breaks one rule.
MALFORMED = [
    ({"torch_group": "0-3x"}, "tempotrace.torch.group"),
    ({"torch_group": "3-1"}, "tempotrace.torch.group"),  # b < a
    ({"torch_group": "0-6:4"}, "tempotrace.torch.group"),  # 6 - 0 is no multiple of 4
    ({"torch_group": "0-2147483648"}, "tempotrace.torch.group"),  # beyond the largest rank
    ({"torch_group": "0-9999999"}, "tempotrace.torch.group"),  # 10^7 ranks: more than any group may claim
    ({"torch_group_size": 5}, "tempotrace.torch.group"),  # the key names 4
    ({"torch_group_rank": 4}, "tempotrace.torch.group_rank"),
    ({"torch_completion": "maybe"}, "tempotrace.torch.completion"),
    ({"torch_seq": -1}, "tempotrace.torch.seq"),
    ({"torch_src": "1"}, "tempotrace.torch.src"),
    ({"torch_recv.missing": [-1]}, "tempotrace.torch.recv.missing"),
    ({"torch_recv.svc_sketch": "ab"}, "tempotrace.torch.recv.svc_sketch"),
    ({"torch_remote.span_id": "not-hex-at-all!!"}, "tempotrace.torch.remote.span_id"),
    ({"torch_batched": "yes"}, "tempotrace.torch.batched"),
    ({"torch_carriage": "always"}, "tempotrace.torch.carriage"),
    ({"torch_clock_check.verdict": "fine"}, "tempotrace.torch.clock_check.verdict"),
    ({"world_size": 0}, "tempotrace.world_size"),
]


@pytest.mark.parametrize(("extra", "field"), MALFORMED)
def test_a_malformed_torch_value_is_refused_and_counted(tmp_path: Path, extra: dict[str, Any], field: str) -> None:
    """§5.1: the span is refused with the attribute and the rule named; the rest of its line is kept."""
    spans = [op_span(0, 0, 1000, seq=0, **extra), op_span(1, 0, 1000, seq=0)]
    report = analyze(write(str(tmp_path / "t.jsonl"), spans))
    assert (report.bad_spans, report.spans) == (1, 1), report.bad_samples  # the other span is kept
    assert field in report.bad_samples[0]["reason"]


def test_every_torch_attribute_the_sdk_writes_has_a_rule() -> None:
    """The one table knows every tempotrace.torch.* name in semconv (a new one needs its row)."""
    from tempotrace_sdk import semconv

    names = {v for k, v in vars(semconv).items() if k.startswith("TORCH_") and isinstance(v, str)}
    assert names and names <= set(SPAN_RULES), names - set(SPAN_RULES)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Two files read side by side: 30 steps (traces) of an 8-rank job with a liar (rank 5), a rank that
    skips one collective, p2p messages one way around the ring, an HTTP-free job; the second file holds a
    second delivery of a few lines (duplicates) and a bad line."""
    folder = tmp_path_factory.mktemp("torch-engines")
    a: list[dict[str, Any]] = []
    for step in range(30):
        trace = 0x5000 + step * 7919
        t = step * 20 * MS
        for seq in range(3):
            for r in range(8):
                if step == 4 and seq == 1 and r == 6:
                    continue  # rank 6 never joined
                off = 10 * MS if r == 5 else 0
                a.append(op_span(r, t + seq * 3 * MS + r * 100 + off, t + seq * 3 * MS + 2 * MS + off,
                                 group="0-7", seq=step * 3 + seq, trace=trace))
        for r in range(8):
            a.append(p2p_span("send", r, (r + 1) % 8, t + 10 * MS, t + 10 * MS + 500, group="0-7", trace=trace,
                              seq=step, sid=0x10000 * (step + 1) + r + 1))
            a.append(p2p_span("recv", (r + 1) % 8, r, t + 10 * MS + 100, t + 11 * MS, group="0-7", trace=trace,
                              seq=step, sid=0x10000 * (step + 1) + 0x100 + r + 1))
    first = write(str(folder / "a.jsonl"), a, per_line=16)
    lines = Path(first).read_text().splitlines()
    second = folder / "b.jsonl"
    second.write_text("\n".join([*lines[5:9], "{cut sho"]) + "\n")
    return [first, str(second)]


def _comparable(d: dict[str, Any]) -> dict[str, Any]:
    d = dict(d)
    d.pop("elapsed_s")
    return d


WINDOW = 50


def test_the_torch_inputs_exercise_what_partitions_could_get_wrong(mixed: list[str]) -> None:
    d = analyze(mixed, window_spans=WINDOW, keep=10_000).to_dict()
    assert d["trace_parts"] > d["traces"] and d["duplicate_spans"] > 0 and d["bad"]["lines"] == 1
    assert d["collective_counts"]["incomplete"] == 1 and d["collective_counts"]["complete"] == 89
    assert d["p2p"]["matched"] == d["p2p"]["total"] == 240
    assert [(f["rank"], f["verdict"]) for f in d["faults"]] == [(5, "lying")]
    assert len(d["collectives"]) == 90


def test_jobs_give_one_processs_collectives(mixed: list[str]) -> None:
    one = _comparable(analyze(mixed, window_spans=WINDOW, keep=10_000).to_dict())
    assert _comparable(analyze(mixed, window_spans=WINDOW, keep=10_000, jobs=3).to_dict()) == one


@pytest.mark.slow
def test_dask_gives_one_processs_collectives(mixed: list[str]) -> None:
    distributed = pytest.importorskip("distributed")
    one = _comparable(analyze(mixed, window_spans=WINDOW, keep=10_000).to_dict())
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        outcomes = analyze_dask(expand(mixed), None, Options(window=WINDOW, keep=10_000),
                                scheduler=c.scheduler_address, partitions=3, chunk_bytes=50_000)
    merged = merge_reports([o.partial for o in outcomes], 10_000).to_dict()
    merged["elapsed_s"] = 0
    assert _comparable(merged) == one
    assert json.dumps(one["collectives"])  # the records are plain JSON


def test_in_memory_sdk_spans_go_through_the_same_rules() -> None:
    """api.records_from_readable (plain values, as the torch instrumentation sets them: tuples, bools) builds
    the same collective as the file reader, and refuses a malformed torch value with the same error."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tempotrace_sdk.analysis import AttributeRuleError, analyze_spans

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    t0 = 1_800_000_000_000_000_000
    with tracer.start_as_current_span("torch.step"):
        for rank in range(2):
            attrs = {"tempotrace.rank": rank, "tempotrace.torch.op": "barrier", "tempotrace.torch.group": "0-1",
                     "tempotrace.torch.group_rank": rank, "tempotrace.torch.group_size": 2, "tempotrace.torch.seq": 0,
                     "tempotrace.torch.batched": False, "tempotrace.torch.recv.missing": (1 - rank,),
                     "tempotrace.ptp_ns": t0 + rank, "tempotrace.uncertainty_ns": 220, "tempotrace.clk_quality": "OK",
                     "tempotrace.end.ptp_ns": t0 + 10_000, "tempotrace.end.uncertainty_ns": 220,
                     "tempotrace.end.clk_quality": "OK"}
            tracer.start_span("torch.barrier", attributes=attrs).end()
    report = analyze_spans(exporter.get_finished_spans())
    assert (report.collectives.complete, report.collectives.outcomes["consistent"]) == (1, 1)
    bad = tracer.start_span("torch.barrier", attributes={"tempotrace.torch.op": "barrier",
                                                         "tempotrace.torch.group": "0-1", "tempotrace.torch.seq": -3})
    bad.end()
    with pytest.raises(AttributeRuleError, match=r"tempotrace\.torch\.seq"):
        analyze_spans(exporter.get_finished_spans())


def test_groups_claiming_a_million_ranks_cost_no_more_than_their_spans(tmp_path: Path) -> None:
    """A hostile (or broken) input: 2,000 spans, each the only member of a 2^20-rank group. Each is one
    incomplete collective; their missing ranks are counted, not listed, and none is kept for rendering."""
    spans = [op_span(0, 0, 1000, group=f"0-{2**20 - 1}", seq=k) for k in range(2000)]
    report = analyze(write(str(tmp_path / "t.jsonl"), spans, per_line=500))
    counts = report.to_dict()["collective_counts"]
    assert (counts["incomplete"], counts["missing_members"]) == (2000, 2000 * (2**20 - 1))
    assert counts["missing_ranks"] == [] and counts["incomplete_first"] == [] and report.collectives_kept == []


def test_open_collectives_stay_within_the_hop_horizon(tmp_path: Path) -> None:
    """§5.2: 3,000 collectives that never complete (rank 3 never joins), one trace each: what is gathered
    at any time is bounded by the horizon, not by the input."""
    from tempotrace_sdk.analysis.analyzer import Analyzer
    from tempotrace_sdk.analysis.reader import iter_spans

    spans = [op_span(r, 0, 1000, seq=0, trace=0x7000 + k) for k in range(3000) for r in range(3)]
    analyzer = Analyzer(window_spans=100)
    most = 0
    for record in iter_spans(write(str(tmp_path / "t.jsonl"), spans)):
        analyzer.add(record)
        most = max(most, len(analyzer.collectives))
    report = analyzer.finish()
    assert report.collectives.incomplete == 3000 and most <= (analyzer.horizon + 2 * analyzer.window) // 3


def _written_values() -> list[tuple[str, Any]]:
    from tempotrace_sdk import semconv

    return ([("torch_completion", v) for v in semconv.TORCH_COMPLETIONS]
            + [("torch_clock_check.verdict", v) for v in semconv.TORCH_CLOCK_VERDICTS])


@pytest.mark.parametrize(("name", "value"), _written_values())
def test_every_value_the_sdk_writes_is_accepted(tmp_path: Path, name: str, value: Any) -> None:
    """The SDK's own lists (semconv) are the analysis's: 'queued' and 'unmeasured', added to the SDK, were
    once refused as malformed, dropping the spans of NCCL ops and of clock checks from the report."""
    report = analyze(write(str(tmp_path / "t.jsonl"), [op_span(0, 0, 1000, seq=0, **{name: value})]))
    assert (report.bad_spans, report.spans) == (0, 1), report.bad_samples
