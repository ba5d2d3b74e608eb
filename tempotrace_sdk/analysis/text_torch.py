"""The torch job section that opens the text report: what an ML engineer came for (spec/analysis.md §6).

Per job: each step's slowest rank and by how much, each rank's time in communication against the rest of
its steps, the ops that failed with their exception, the collectives a rank never joined, and a clock that
lied (its readings also decide who looks slowest). The edge-decision summary follows it (text.py). Every
string from the input (job id, host, op, group, error) is shown through ``_terminal_text.shown``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._terminal_text import MESSAGE_LIMIT, shown
from .html_text import fault_verdicts

if TYPE_CHECKING:
    from .report import AnalysisReport
    from .torchjob import JobSteps

__all__ = ["TEXT_RANKS", "duration", "job_warnings", "torch_lines"]

#: Ranks in the text's per-rank table; a larger job's are in the JSON (``torch.by_job[].ranks``).
TEXT_RANKS = 16
#: Failed ops and incomplete collectives shown (the JSON keeps the first 20 of each).
TEXT_SAMPLES = 5


def duration(ns: int) -> str:
    """A length of time in the unit its size asks for: 850 ns, 12.4 µs, 3.210 ms, 1.500 s."""
    if ns < 1_000:
        return f"{ns} ns"
    if ns < 1_000_000:
        return f"{ns / 1e3:.1f} µs"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:,.3f} ms"
    return f"{ns / 1e9:,.3f} s"


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _rank(rank: int | None, host: str) -> str:
    return shown(host) if rank is None else f"rank {rank} ({shown(host)})"


def _flag(flags: dict[tuple[str, int | None], str], host: str, rank: int | None) -> str:
    verdict = flags.get((host, rank))
    return f" by its {verdict.upper()} clock's readings" if verdict else ""


def _step_line(row: dict[str, Any], flags: dict[tuple[str, int | None], str]) -> str:
    head = f"  step {row['step']}" + "".join([f" (use {row['occurrence'] + 1})" if row["occurrence"] else "",
                                             f" (restart {row['restart']})" if row["restart"] else ""])
    who = row["slowest"]
    if who is None:
        said = "no collective with two ranks or more: no slowest rank"
    else:
        said = (f"slowest {_rank(who['rank'], who['host'])}{_flag(flags, who['host'], who['rank'])}: last at "
                f"{who['last']:,} of {row['collectives']:,} collectives, {duration(who['late_ns'])} behind the first "
                "arriver" + (" in all" if who["last"] > 1 else ""))
    extra = "".join([f"; {_n(row['failed'], 'failed op')}" if row["failed"] else "",
                     f"; {_n(row['incomplete'], 'incomplete collective')}" if row["incomplete"] else "",
                     "; TWO RUNS in one trace (same job id and restart)" if row["repeated"] else ""])
    return f"{head}: {said}; longest step {duration(row['longest_ns'])}{extra}"


def _rank_table(steps: JobSteps, flags: dict[tuple[str, int | None], str]) -> list[str]:
    rows = steps.rank_rows()
    note = ""
    if len(rows) > TEXT_RANKS:
        rows = sorted(rows, key=lambda r: (-r["slowest_in"], -r["rest_ns"], r["rank"] or 0))[:TEXT_RANKS]
        note = f" (the {TEXT_RANKS} slowest most often of {len(steps.ranks):,}; --json lists every rank)"
    out = [f"  per rank, over its steps{note} (communication: inside torch.distributed ops, waiting included):",
           f"    {'':<26} {'step time':>12}  {'in communication':>20}  {'rest of the step':>20}  slowest in"]
    for r in rows:
        total = r["step_ns"] or 1
        verdict = flags.get((r["host"], r["rank"]))
        name = _rank(r["rank"], r["host"]) + (f" {verdict.upper()}" if verdict else "")
        out.append(f"    {name:<26} {duration(r['step_ns']):>12}  {duration(r['comm_ns']):>12} "
                   f"({100 * r['comm_ns'] / total:4.1f}%)  {duration(r['rest_ns']):>12} "
                   f"({100 * r['rest_ns'] / total:4.1f}%)  {r['slowest_in']:,} of {r['steps']:,} steps")
    return out


def _failed_lines(report: AnalysisReport) -> list[str]:
    """Failed torch spans, the ranks of one failure (same step, op and exception) on one line."""
    tj = report.torch_job
    if not tj.failed:
        return []
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for _, f in tj.failed_first:
        groups.setdefault((f["step"], f["op"], f["group"], f["seq"], f["name"], f["error"]), []).append(f)
    out = [f"  FAILED ops: {tj.failed:,} (status ERROR)"]
    for (step, op, group, seq, name, error), fs in list(groups.items())[:TEXT_SAMPLES]:
        what = f"{shown(op)} [{shown(group)}] #{seq}" if op is not None and seq is not None else \
            f"{shown(op)} [{shown(group)}]" if op is not None else shown(name)
        where = "outside a step" if step is None else f"step {step}"
        fs.sort(key=lambda f: (f["rank"] is None, f["rank"] or 0, f["host"]))
        ranks = ", ".join(_rank(f["rank"], f["host"]) for f in fs)
        out.append(f"    {what}, {where}, on {ranks}: {shown(error, MESSAGE_LIMIT)}")
    if len(groups) > TEXT_SAMPLES or tj.failed > len(tj.failed_first):
        out.append("    ... (--json: torch.failed lists the first 20)")
    return out


def _incomplete_lines(report: AnalysisReport) -> list[str]:
    tj, c = report.torch_job, report.collectives
    if not c.incomplete:
        return []
    out = [f"  INCOMPLETE collectives: {c.incomplete:,} (a rank never joined: it crashed, hung, ran uninstrumented "
           "or lost its spans" + (f"; or, for {c.split:,} later pieces, the hop horizon cut the collective: see the "
                                  "warnings" if c.split else "") + ")"]
    for _, inc in tj.incomplete_first[:TEXT_SAMPLES]:
        where = "outside a step" if inc["step"] is None else f"step {inc['step']}"
        names = inc["missing_ranks"]
        if not names:  # more than collectives.MAX_LISTED: counted, not named
            who = f"{inc['missing']:,} ranks"
        else:
            who = ("ranks " if inc["missing"] > 1 else "rank ") + ", ".join(str(r) for r in names) + (
                " ..." if len(names) < inc["missing"] else "")
        out.append(f"    {shown(inc['op'])} [{shown(inc['group'])}] #{inc['seq']}, {where}: {who} never joined")
    if c.incomplete > TEXT_SAMPLES:
        out.append("    ... (--json: torch.incomplete_first lists the first 20)")
    return out


def _clock_lines(report: AnalysisReport) -> list[str]:
    out = []
    for f in report.faults:
        who = _rank(f.rank, f.host)
        if f.verdict == "lying":
            out.append(f"  LYING clock: {who} broke its ±{f.claimed_bound_ns:,} ns claim by up to "
                       f"{duration(f.max_excess_ns)} on {f.violations:,} of {f.edges:,} edges: its readings (who "
                       "arrived last, and when) cannot be trusted (clock faults, below)")
        else:
            out.append(f"  SUSPECT clock: {who}: it and a peer disagree beyond their claims and nothing tells "
                       "which lied (clock faults, below)")
    return out


def job_warnings(report: AnalysisReport) -> list[str]:
    """Runs mixed in one input: several job ids, or two runs of one job id in one step's trace."""
    out = []
    ids = report.jobs.job_ids()
    if len(ids) > 1:
        per = {row["job_id"]: row["spans"] for row in report.jobs.to_list()}
        named = ", ".join(f"{shown(j)} ({per[j]:,} spans)" for j in ids[:5]) + (" ..." if len(ids) > 5 else "")
        out.append(f"this input holds {len(ids):,} jobs: {named}; their steps are reported apart, their clocks and "
                   "edges together (analyse one job's file for its own report)")
    if report.torch_job.repeated_steps:
        out.append(f"{report.torch_job.repeated_steps:,} steps hold two step spans of one rank: two runs named the "
                   "same job id and restart (set TEMPOTRACE_JOB_ID, or torchrun --rdzv-id, per run), or an SDK "
                   "without step_occurrence used one step number twice")
    return out


def torch_lines(report: AnalysisReport) -> list[str]:
    """The torch section (empty for an input without step spans or torch ops)."""
    tj = report.torch_job
    jobs = tj.by_job()
    if not jobs and not tj.failed and not report.collectives.total:
        return []
    flags = fault_verdicts(report)
    lines: list[str] = []
    for job_id, steps in jobs:
        ranks = len(steps.ranks)
        name = shown(job_id) if job_id else "(no job id in the spans)"
        listed = steps.step_rows()
        lines.append(f"torch job {name}: {ranks:,} ranks, {steps.steps:,} steps")
        if len(listed) < steps.steps:
            lines.append(f"  (the {len(listed)} of {steps.steps:,} steps whose slowest rank trailed most; --json "
                         "lists the same)")
        lines += [_step_line(row, flags) for row in listed]
        lines += _rank_table(steps, flags)
    if not jobs:
        lines.append("torch ops (no step() span: per-step times need tempotrace_sdk.torch.step)")
    lines += _failed_lines(report)
    lines += _incomplete_lines(report)
    lines += _clock_lines(report)
    return lines
