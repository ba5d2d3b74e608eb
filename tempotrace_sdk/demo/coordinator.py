"""The demo's coordinator: cast the clocks, run the workload, analyse its spans, tell the story.

The workload is the torchrun training job (``torch_demo``, the default) or
the HTTP imitation of a step (``http_demo``, ``--http``). Either way the
coordinator itself is not traced, every process it started is stopped on
every path out, and the analysis runs on the one span file the ranks wrote.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .._terminal_text import shown
from .checks import http_checks, torch_checks
from .formatting import offset_text
from .model import DemoConfig, DemoResult
from .plan import RankPlan, plan_ranks
from .summary import examples, hop_stats, render_summary
from .torch_story import cross_rank_edges, torch_story

if TYPE_CHECKING:
    from ..analysis import AnalysisReport

__all__ = ["DemoConfig", "DemoResult", "Progress", "analyse", "output_paths", "run_demo"]

#: The analysis keeps at least this many spans for its renderers (more when the job made more).
KEEP_SPANS = 20_000


class Progress:
    """Prints a progress line with the seconds since the demo began."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.t0 = time.monotonic()

    def __call__(self, message: str) -> None:
        print(f"[{time.monotonic() - self.t0:5.1f}s] {message}", file=self.stream, flush=True)


def output_paths(out: Path) -> dict[str, Path]:
    """The demo's output folder (made) and files in it; what an earlier run left there is removed."""
    folder = out.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    paths = {
        "out": folder,
        "trace": folder / "trace.jsonl",
        "report": folder / "report.json",
        "perfetto": folder / "trace.perfetto.json",
        "html": folder / "report.html",
    }
    for stale in ("trace", "report", "perfetto", "html"):
        paths[stale].unlink(missing_ok=True)  # the exporter appends; a rerun must start clean
    for old in (*folder.glob("result-*.json"), *folder.glob("rank-*.log")):
        old.unlink(missing_ok=True)  # a torch rank that failed must not leave an older run's result behind
    return paths


def analyse(paths: dict[str, Path], keep: int = KEEP_SPANS) -> AnalysisReport:
    """The analysis of the run's span file, also written as JSON, Perfetto and HTML."""
    from ..analysis import analyze_file, write_html, write_json, write_perfetto

    report = analyze_file(str(paths["trace"]), keep=keep)
    write_json(report, str(paths["report"]))
    write_perfetto(report, str(paths["perfetto"]))
    write_html(report, str(paths["html"]))
    return report


def _cast(plans: list[RankPlan], config: DemoConfig, folder: Path, stream: TextIO) -> None:
    where = "localhost processes talking HTTP" if config.http else "CPU ranks under torchrun (gloo)"
    print(f"TempoTrace demo: {len(plans)} {where}, {config.iterations} "
          f"{'iterations' if config.http else 'training steps'}; outputs in {folder}/", file=stream)
    print(f"  {'rank':<5}{'host':<7}{'clock profile':<15}{'true error':>12}   claims in every tt-ext", file=stream)
    for p in plans:
        note = "   <- lies: error far beyond its claim" if p.liar else ""
        print(f"  {p.rank:<5}{shown(p.host):<7}{p.profile:<15}{offset_text(p.offset_ns):>12}   {p.claim}{note}",
              file=stream)
    stream.flush()


def run_demo(config: DemoConfig, out: TextIO | None = None) -> DemoResult:
    """Run the whole demo; raise ``WorkerError`` when a worker fails (workers are always stopped)."""
    stream = out or sys.stdout
    say = Progress(stream)
    plans = plan_ranks(config.ranks, liar=config.liar, liar_offset_ns=config.liar_offset_ns, seed=config.seed)
    paths = output_paths(config.out)
    _cast(plans, config, paths["out"], stream)
    hops = 0
    workload: Any = None
    if config.http:
        from .http_demo import run_http_workload

        hops = run_http_workload(plans, config, paths["out"], say)
    else:
        from .torch_demo import run_torch_workload

        workload = run_torch_workload(plans, config, paths["out"], say)

    keep = KEEP_SPANS
    if workload is not None:
        keep = max(keep, 2 * sum(sum(r["ops"].values()) + 1 for r in workload.rank_results))
    report = analyse(paths, keep)
    data = report.to_dict()
    say(f"analysed {data['spans']:,} spans in {data['traces']:,} traces")
    result = DemoResult(plans, data, paths, hops, time.monotonic() - say.t0)
    liars = {p.host for p in plans if p.liar}
    if workload is None:
        result.examples = examples(report.hops_kept, liars)
        result.naive_hops, result.saturated_hops = hop_stats(report.hops_kept, plans)
        result.checks = http_checks(plans, data, hops, result.saturated_hops)
    else:
        p2p = [h for h in report.hops_kept if h.get("kind") == "p2p"]
        collectives: list[dict[str, Any]] = list(getattr(report, "collectives_kept", None) or [])
        story = torch_story(p2p, collectives, report.spans_kept, plans, data.get("stragglers"))
        result.clock_check = workload.clock_check
        result.rank_results = workload.rank_results
        result.torch = story.to_dict()
        result.torch["cross_rank_edges"] = cross = cross_rank_edges(data)
        result.torch["carriage"] = config.carriage
        result.examples = story.examples
        result.naive_hops, result.saturated_hops = story.p2p_naive, dict(story.saturated)
        result.checks, result.not_checked = torch_checks(
            plans, data, workload.rank_results, report.spans_kept, story, cross)
    print(render_summary(result), file=stream, flush=True)
    return result
