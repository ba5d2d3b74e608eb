"""The torch job section of the HTML report: the text report's opening, as tables (spec/analysis.md §6.3).

Written by Python from the same records as the JSON's ``torch`` and ``stragglers`` (report.torch_job,
report.collectives), so page, text and JSON say the same: per job, each listed step's slowest rank and by
how much, each rank's communication against the rest of its steps, the stragglers, failed ops, incomplete
collectives and flagged clocks. Strings from the input are escaped by ``html.escape``.
"""

from __future__ import annotations

import html
from typing import Any

from .html_text import fault_verdicts
from .report import AnalysisReport
from .text_torch import duration

__all__ = ["torch_section"]


def _e(value: object) -> str:
    return html.escape(str(value))


def _who(rank: int | None, host: str) -> str:
    return _e(host) if rank is None else f"rank {rank} ({_e(host)})"


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "–"


def _flag(verdicts: dict[tuple[str, int | None], str], host: str, rank: int | None) -> str:
    verdict = verdicts.get((host, rank))
    return f' <span class="flag {verdict}">{verdict.upper()} clock</span>' if verdict else ""


def _steps_table(rows: list[dict[str, Any]], verdicts: dict[tuple[str, int | None], str]) -> str:
    out = ['<table class="torch-steps"><tr><th>Step</th><th>Slowest rank</th><th>Last at</th>'
           "<th>Behind the first arriver</th><th>Longest step</th><th>Failed ops</th><th>Incomplete</th></tr>"]
    for row in rows:
        who = row["slowest"]
        step = f"{row['step']}" + "".join([f" (use {row['occurrence'] + 1})" if row["occurrence"] else "",
                                           f" (restart {row['restart']})" if row["restart"] else ""])
        if who is None:
            cells = '<td colspan="3">no collective with two ranks or more</td>'
        else:
            cells = (f'<td data-slowest-rank="{who["rank"] if who["rank"] is not None else ""}">'
                     f"{_who(who['rank'], who['host'])}{_flag(verdicts, who['host'], who['rank'])}</td>"
                     f'<td class="n">{who["last"]:,} of {row["collectives"]:,}</td>'
                     f'<td class="n" data-late-ns="{who["late_ns"]}">{duration(who["late_ns"])}</td>')
        out.append(f'<tr data-step="{row["step"]}" data-trace="{_e(row["trace_id"])}"><td>{step}</td>{cells}'
                   f'<td class="n">{duration(row["longest_ns"])}</td><td class="n">{row["failed"]:,}</td>'
                   f'<td class="n">{row["incomplete"]:,}</td></tr>')
    out.append("</table>")
    return "\n".join(out)


def _ranks_table(rows: list[dict[str, Any]], verdicts: dict[tuple[str, int | None], str]) -> str:
    out = ['<table class="torch-ranks"><tr><th>Rank</th><th>Step time</th><th>In communication</th><th></th>'
           "<th>Rest of the step</th><th></th><th>Slowest in</th></tr>"]
    for r in rows:
        rank = "" if r["rank"] is None else r["rank"]
        out.append(f'<tr data-rank="{rank}" data-comm-ns="{r["comm_ns"]}" data-rest-ns="{r["rest_ns"]}">'
                   f"<td>{_who(r['rank'], r['host'])}{_flag(verdicts, r['host'], r['rank'])}</td>"
                   f'<td class="n">{duration(r["step_ns"])}</td><td class="n">{duration(r["comm_ns"])}</td>'
                   f'<td class="n">{_pct(r["comm_ns"], r["step_ns"])}</td><td class="n">{duration(r["rest_ns"])}</td>'
                   f'<td class="n">{_pct(r["rest_ns"], r["step_ns"])}</td>'
                   f'<td class="n">{r["slowest_in"]:,} of {r["steps"]:,} steps</td></tr>')
    out.append("</table>")
    return "\n".join(out)


def _stragglers(report: AnalysisReport, verdicts: dict[tuple[str, int | None], str]) -> str:
    rows = report.collectives.straggler_rows()
    if not rows:
        return ""
    out = ['<table id="stragglers"><tr><th>Straggler</th><th>Last in</th><th>Certain by physics</th>'
           "<th>Behind the first, on average</th></tr>"]
    for row in rows:
        rank = "" if row["rank"] is None else row["rank"]
        out.append(f'<tr data-rank="{rank}" data-host="{_e(row["host"])}"><td>{_who(row["rank"], row["host"])}'
                   f"{_flag(verdicts, row['host'], row['rank'])}</td>"
                   f'<td class="n">{row["last"]:,} of {row["joined"]:,}</td><td class="n">{row["last_certain"]:,}</td>'
                   f'<td class="n">{duration(row["late_ns_total"] // row["last"])}</td></tr>')
    out.append("</table>")
    return "\n".join(out)


def _problems(report: AnalysisReport) -> str:
    tj, items = report.torch_job, []
    for _, f in tj.failed_first:
        what = f"{_e(f['op'])} [{_e(f['group'])}] #{f['seq']}" if f["op"] is not None else _e(f["name"])
        where = "outside a step" if f["step"] is None else f"step {f['step']}"
        items.append(f'<li class="failed">FAILED {what}, {where}, on {_who(f["rank"], f["host"])}: '
                     f"<code>{_e(f['error'])}</code></li>")
    for _, inc in tj.incomplete_first:
        where = "outside a step" if inc["step"] is None else f"step {inc['step']}"
        named = ", ".join(map(str, inc["missing_ranks"])) or f"{inc['missing']:,} ranks"
        items.append(f'<li class="incomplete">INCOMPLETE {_e(inc["op"])} [{_e(inc["group"])}] #{inc["seq"]}, '
                     f"{where}: rank(s) {named} never joined</li>")
    c = report.collectives
    if c.split:
        items.append(f'<li class="incomplete">{c.split:,} of the incomplete collectives are later pieces of ones the '
                     f"hop horizon cut: their members lie up to {c.split_distance:,} spans apart in the input, so "
                     "ranks named as never joined may have joined in another piece (a larger <code>--window</code> "
                     "gathers them)</li>")
    for fault in report.faults:
        items.append(f'<li class="clock {fault.verdict}">{fault.verdict.upper()} clock: '
                     f"{_who(fault.rank, fault.host)}, claimed ±{fault.claimed_bound_ns:,} ns, broke it by up to "
                     f"{duration(fault.max_excess_ns)}: its readings (who arrived last, and when) cannot be "
                     "trusted</li>")
    more = tj.failed - len(tj.failed_first)
    if more > 0:
        items.append(f"<li>… and {more:,} more failed ops (the JSON counts them all)</li>")
    return f'<ul id="torch-problems">{"".join(items)}</ul>' if items else ""


def torch_section(report: AnalysisReport) -> str:
    """The section's HTML, or "" for an input without torch spans."""
    tj = report.torch_job
    jobs = tj.by_job()
    if not jobs and not tj.failed and not report.collectives.total:
        return ""
    verdicts = fault_verdicts(report)
    parts = ['<section id="torch">']
    for job_id, steps in jobs:
        listed = steps.step_rows()
        name = _e(job_id) if job_id else "(no job id in the spans)"
        note = (f" (the {len(listed)} whose slowest rank trailed most)" if len(listed) < steps.steps else "")
        parts.append(f'<h2 data-job="{_e(job_id)}">torch job {name}: {len(steps.ranks):,} ranks, '
                     f"{steps.steps:,} steps{note}</h2>")
        parts.append(_steps_table(listed, verdicts))
        parts.append("<p>Per rank, over its steps (communication: inside torch.distributed ops, waiting "
                     "included):</p>")
        parts.append(_ranks_table(steps.rank_rows(), verdicts))
    if not jobs:
        parts.append("<h2>torch ops</h2>")
    parts.append(_stragglers(report, verdicts))
    parts.append(_problems(report))
    parts.append("</section>")
    return "\n".join(p for p in parts if p)
