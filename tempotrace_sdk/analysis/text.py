"""The report as a person reads it: ``tempotrace analyze`` without ``--json`` (spec/analysis.md §6): the hang
report's lines first (text_hang.py), then the title, the torch job (text_torch.py) and the edge decisions.

Every string the input gave (a host, a path, a reason quoting a value) is shown through
``_terminal_text.shown`` where it is put into a line: a hostile trace cannot drive the reader's terminal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._terminal_text import MESSAGE_LIMIT, shown
from .text_hang import hang_lines
from .text_torch import job_warnings, torch_lines

if TYPE_CHECKING:
    from .report import AnalysisReport

__all__ = ["collective_lines", "collective_warnings", "physics_note", "report_text", "warnings"]

_SILENCE_WORDS = {
    "no_reading": "a side had no TempoTrace reading",
    "policy_degrade": "a span's policy verdict was degrade (never ordered by physical time)",
    "unknown_quality": "a clock said UNKNOWN (not synchronised)",
    "saturated_bound": "a bound was saturated (>= 65,535 ns: NTP-class or worse)",
    "overlap": "the bounds overlapped",
}


def physics_note(report: AnalysisReport) -> str | None:
    """Why physics decided no edge at all, when that is so (a host without PTP: the normal case)."""
    e = report.edges
    if not e.total or e.decided["physics"] or e.wrong["physics"]:
        return None
    reasons = sorted(e.physics_silent.items(), key=lambda kv: -kv[1])
    why = "; ".join(f"{n:,} edges: {_SILENCE_WORDS.get(k, k)}" for k, n in reasons)
    return (f"physics decided no edge: {why}. Ordering fell back to Lamport/SVC and the derived order; physical "
            "time needs "
            "clocks with a usable bound (PTP-class: `tempotrace clock` shows what this host has)")


def warnings(report: AnalysisReport) -> list[str]:
    """What a user must not miss: skipped input, spans an exporter dropped, a physics-free analysis."""
    out = []
    if report.bad_lines or report.bad_spans:
        first = report.bad_samples[0] if report.bad_samples else None
        where = (f" (first: {shown(first['path'], MESSAGE_LIMIT)}:{first['line']}: "
                 f"{shown(first['reason'], MESSAGE_LIMIT)})" if first else "")
        out.append(f"skipped {report.bad_lines:,} unreadable lines and {report.bad_spans:,} malformed spans or "
                   f"spans whose values break a rule{where}; --strict stops at the first")
    if report.not_traces:
        out.append(f"{len(report.not_traces):,} files in the input directories are not trace files, skipped: "
                   + "; ".join(shown(entry, MESSAGE_LIMIT) for entry in report.not_traces[:3])
                   + (" ..." if len(report.not_traces) > 3 else ""))
    dropped = report.export_dropped_spans
    if dropped:
        writers = sum(1 for n in report.export_loss.values() if n)
        out.append(f"the exporters dropped {dropped:,} spans before writing them ({writers:,} of "
                   f"{len(report.export_loss):,} writers): the input is incomplete")
    out += job_warnings(report)
    out += collective_warnings(report)
    note = physics_note(report)
    if note:
        out.append(note)
    return out


def collective_warnings(report: AnalysisReport) -> list[str]:
    """Collectives a rank never joined, collectives whose ranks disagreed, records that name another sender."""
    c, out = report.collectives, []
    if c.incomplete:
        ranks = sorted(c.missing_by_rank.items(), key=lambda rn: (-rn[1], rn[0]))
        named = ", ".join(f"rank {r} ({n:,})" for r, n in ranks[:5]) + (" ..." if len(ranks) > 5 else "")
        out.append(f"{c.incomplete:,} collectives incomplete: {c.missing_members:,} member spans missing"
                   + (f" ({named})" if named else "") + "; a rank that never joined crashed, hung, ran "
                   "uninstrumented or lost its spans (collective_counts.incomplete_first names them)")
    if c.split:
        horizon = report.limits.get("hop_horizon", 0)
        window = -(-c.split_distance * 11 // 10 // 10_000) * 10_000  # the distance and a tenth, in 10,000s
        out.append(f"{c.split:,} of them are later pieces of collectives the hop horizon ({horizon:,} spans) cut in "
                   f"pieces: their members lie up to {c.split_distance:,} spans apart in the input (a large group's "
                   "ranks exporting in batches), so each piece counts incomplete, missing ranks whose members are "
                   f"in another piece; --window {window:,} or more gathers them (memory grows with the window)")
    if c.mismatched:
        out.append(f"{c.mismatched:,} collectives whose ranks called different ops or roots for one sequence "
                   "number: the program's ranks disagree (a real job hangs or corrupts data there)")
    if report.p2p.record_mismatch:
        out.append(f"{report.p2p.record_mismatch:,} point-to-point receives carry a record from another send than "
                   "the sequence numbers pair: their evidence blames no clock")
    if report.p2p.ambiguous:
        out.append(f"{report.p2p.ambiguous:,} point-to-point receives are marked ambiguous (an any-source and a "
                   "specific receive outstanding together): torch may have paired them otherwise, so they order "
                   "nothing")
    return out


def collective_lines(report: AnalysisReport) -> list[str]:
    """The collectives, stragglers and point-to-point messages, when the input has any."""
    c, p = report.collectives, report.p2p
    lines = []
    if c.total:
        o = c.outcomes
        lines.append(f"  collectives {c.total:,} ({c.complete:,} complete, {c.incomplete:,} incomplete), claims: "
                     f"consistent {o['consistent']:,} (" + ", ".join(f"{k} {v:,}" for k, v in c.decided.items()
                                                                    if k != "undecided")
                     + f"), undecided {o['undecided']:,}, CONTRADICTED {o['contradiction']:,}"
                     + (f", no claim {c.no_claim:,}" if c.no_claim else ""))
        liars = {(f.host, f.rank) for f in report.faults}
        for row in c.straggler_rows()[:3]:
            mean = row["late_ns_total"] / row["last"]
            flagged = ("  [its clock is flagged: arrival order by its readings is unreliable]"
                       if (row["host"], row["rank"]) in liars else "")
            lines.append(f"    straggler: {_who(row['host'], row['rank'])} arrived last in {row['last']:,} of "
                         f"{row['joined']:,} (certain by physics {row['last_certain']:,}), {mean / 1e6:,.3f} ms "
                         f"after the first on average{flagged}")
    if p.total:
        lines.append(f"  point-to-point messages {p.total:,} ({p.matched:,} matched; unmatched: "
                     f"{p.unmatched_sends:,} sends, {p.unmatched_recvs:,} receives; {p.carried:,} carried a record"
                     + (f"; {p.ambiguous:,} ambiguous, not ordered" if p.ambiguous else "") + ")")
    return lines


def _who(host: str, rank: int | None) -> str:
    """A clock as the report names it: its host (from the input: shown escaped), and its rank."""
    return shown(host) if rank is None else f"{shown(host)} rank {rank}"


def report_text(report: AnalysisReport) -> str:
    e = report.edges
    n = e.total or 1

    def pct(k: int) -> str:
        return f"{k:>9,}  ({100.0 * k / n:5.1f}%)"

    inputs = f" ({report.inputs:,} inputs)" if report.inputs > 1 else ""
    # Which rank hung, in which collective: before anything else, the title included (spec/analysis.md §6).
    lines = [*hang_lines(report.hang()),
             f"TempoTrace analysis of {shown(report.source or '<spans>', MESSAGE_LIMIT)}{inputs}"]
    torch = torch_lines(report)  # what an ML engineer came for first; the edge decisions below it
    if torch:
        lines += [*torch, "edge decisions (how TempoTrace ordered the events; spec/analysis.md §2):"]
    lines += [
        f"  spans {report.spans:,}   traces {report.traces:,}   hops {report.hops:,} ({report.hops_matched:,} matched)",
        f"  known causal edges {e.total:,}  " + ", ".join(f"{k} {v:,}" for k, v in sorted(e.by_kind.items())),
        "  decided, agreeing with the edge:",
        f"    physics     {pct(e.decided['physics'])}",
        f"    lamport     {pct(e.decided['lamport'])}   (rules out the inversion)",
        f"    svc         {pct(e.decided['svc'])}",
        f"    derived     {pct(e.decided['derived'])}   (from the trace: program order, matched messages and "
        "collectives)",
        f"    undecided   {pct(e.decided['undecided'])}   (no guess)",
        f"  WRONG (confident, contradicts the edge) {pct(sum(e.wrong.values()))}"
        + "   " + ", ".join(f"{k} {v}" for k, v in e.wrong.items() if v),
        f"  naive (raw timestamps) inversions {pct(e.naive_inversions)}   ties {e.naive_ties:,}",
    ]
    lines += collective_lines(report)
    if report.duplicate_spans:
        lines.append(f"  spans delivered more than once: {report.duplicate_spans:,} (counted once)")
    if report.degraded_spans:
        lines.append(f"  spans with policy verdict degrade: {report.degraded_spans:,} (never ordered by physical time)")
    if report.virtual_parents:
        lines.append(f"  torch step parents: {report.virtual_parents:,} step spans hang off their step's virtual "
                     "parent, which is never exported (by design: one trace per step on every rank, spec/torch.md "
                     "§4.1)")
    if report.unresolved_parents:
        lines.append(f"  parents not in the input: {report.unresolved_parents:,} (their edges are not counted)")
    d = report.derived
    if d.cycles:
        lines.append(f"  WARNING: the trace's structure leads round a cycle in {d.cycles:,} trace runs: a message "
                     "numbering or a Lamport counter is broken; the edges on it are WRONG (derived), no clock blamed")
    if d.beyond_limit or d.repeated:
        lines.append(f"  derived order left {d.beyond_limit + d.repeated:,} edges undecided ("
                     + ", ".join(part for part in (
                         f"{d.beyond_limit:,} in trace runs too large to hold" if d.beyond_limit else "",
                         f"{d.repeated:,} in runs with two step spans of one rank" if d.repeated else "") if part)
                     + ")")
    if e.unattributed:
        lines.append(f"  unattributed: {e.unattributed:,} wrong decisions on hops whose sender span is not in the "
                     "input (no clock blamed)")
    if not report.faults:
        lines.append("  clock faults: none attributed to a clock" if e.unattributed
                     else "  clock faults: none (every bound held on every known edge)")
    for f in report.faults:
        lines.append(
            f"  clock fault: {_who(f.host, f.rank)} {f.verdict.upper()} ({f.kind}): {f.violations:,} of "
            f"{f.edges:,} edges ({100 * f.rate:.1f}%), peers {len(f.peers)}, up to {f.max_excess_ns:,} ns beyond "
            f"the bounds (mean {f.mean_excess_ns:,.0f} ns; claimed ±{f.claimed_bound_ns:,} ns)"
        )
    lines += [f"  WARNING: {w}" for w in warnings(report)]
    return "\n".join(lines)
