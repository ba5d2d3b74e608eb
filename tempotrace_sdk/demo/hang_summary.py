"""What ``tempotrace demo --hang`` prints after the job: the top of the analysis' report, its checks, its outputs.

The hang is named by the analysis (the ``HANG:`` block at the top of
``tempotrace analyze``'s text report, analysis/text_hang.py); the demo prints
that block and checks that it names the rank that stopped and the collective
the other ranks' dumps show them pending in, and says so when it does not.
Only when the report names no hang does the demo print the report's first
lines and sum up the dumps' pending ops itself, so that a reader still sees
what the ranks were doing.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .hang_demo import HangResult

__all__ = ["hang_blocks", "hang_checks", "render_hang", "report_head"]

#: Lines of the analysis' text report shown at most (its torch part comes first; the edge decisions after it).
HEAD_LINES = 12
#: Where the report's edge decisions begin (analysis/text.py): the head stops there.
_EDGES_HEADING = "edge decisions"

DUMPED_CHECK = "every rank dumped its flight recorder"
NAMED_CHECK = "the hang report names rank {rank} and the {collective} it never entered"
STOPPED_CHECK = "torchrun and every rank stopped: no process left"


def report_head(text: str) -> list[str]:
    """The report's first lines, up to its edge decisions (at most HEAD_LINES)."""
    head = []
    for line in text.splitlines()[:HEAD_LINES]:
        if line.startswith(_EDGES_HEADING):
            break
        head.append(line)
    return head


def hang_blocks(text: str) -> list[list[str]]:
    """The report's hangs, wherever they are: each ``HANG:`` line with the indented lines under it."""
    blocks: list[list[str]] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("HANG"):
            blocks.append([line])
            inside = True
        elif inside and line.startswith((" ", "\t")):
            blocks[-1].append(line)
        else:
            inside = False
    return blocks


def _collective(result: HangResult) -> str:
    """What the hang line must name: ``all_reduce #<seq>`` where the dumps show the other ranks pending (just
    ``all_reduce`` when they show none)."""
    seqs = {op.seq for op in result.watch.pending if op.op == "all_reduce" and op.seq is not None}
    return f"all_reduce #{seqs.pop()}" if len(seqs) == 1 else "all_reduce"


def _names(line: str, rank: int, collective: str) -> bool:
    # "rank 2" as a word ("ranks 0, 1, 3" never matches it), before the collective ("#13" not "#130")
    return re.search(rf"\brank {rank}\b.*\b{re.escape(collective)}\b", line) is not None


def hang_checks(result: HangResult, stuck: int) -> dict[str, bool]:
    world = result.config.ranks
    collective = _collective(result)
    return {
        DUMPED_CHECK: result.watch.dumped() >= set(range(world)),
        NAMED_CHECK.format(rank=stuck, collective=collective): any(
            _names(block[0], stuck, collective) for block in hang_blocks(result.report_text)),
        STOPPED_CHECK: result.stopped,
    }


def _dump_counts(result: HangResult) -> str:
    first = Counter(records[0].reason for records in result.watch.dumps.values())
    return f"{len(result.watch.dumps)}/{result.config.ranks}" + (
        ": " + ", ".join(f"{reason} {n}" for reason, n in sorted(first.items())) if first else "")


def _pending_summary(result: HangResult) -> str:
    """What the dump records say the ranks were in (only printed when the analysis names no hang)."""
    ranks_in: dict[tuple[str, str | None, int | None], list[int]] = defaultdict(list)
    for op in result.watch.pending:
        ranks_in[(op.op, op.group, op.seq)].append(op.rank)
    parts = [f"ranks {', '.join(map(str, sorted(set(ranks))))} pending in {op} seq {seq} of group {group}"
             for (op, group, seq), ranks in sorted(ranks_in.items(), key=lambda kv: str(kv[0]))]
    idle = sorted(set(result.watch.dumps) - {op.rank for op in result.watch.pending})
    if idle:
        parts.append(f"rank{'s' if len(idle) > 1 else ''} {', '.join(map(str, idle))} in no op")
    return "; ".join(parts) or "no pending op in any dump"


def render_hang(result: HangResult, stuck: int) -> str:
    paths, text = result.paths, result.report_text
    blocks = hang_blocks(text)
    lines = ["", f"Hang report (`tempotrace analyze {paths['trace']}`):"]
    for block in blocks:
        lines += [f"  {line}" for line in block]
    if not blocks:
        lines += [f"  {line}" for line in report_head(text)]
        lines.append("  the analysis names no hang; the dump records themselves say: " + _pending_summary(result))
    lines.append("")
    for name, passed in result.checks.items():
        extra = f" ({_dump_counts(result)})" if name == DUMPED_CHECK else ""
        lines.append(f"  [{'ok' if passed else 'FAILED'}] {name}{extra}")
    timeout = result.config.hang_timeout_s
    if result.dumps_s is not None:
        lines.append(f"  every dump was on disk {result.dumps_s:.1f} s after rank {stuck} stopped (hang_timeout "
                     f"{timeout:g} s); the demo took {result.elapsed_s:.1f} s in all")
    out = paths["out"]
    lines += [
        "",
        f"Outputs in {out}/:",
        f"  spans (OTLP JSON lines)  {paths['trace']}   (the dumps' op spans; pending ones have no end)",
        f"  analysis (JSON)          {paths['report']}",
        f"  Perfetto trace           {paths['perfetto']}   (open in https://ui.perfetto.dev)",
        f"  HTML timeline            {paths['html']}",
        f"  logs                     {out}/rank-*.log, {out}/torchrun.log",
        f"  analyse it again         tempotrace analyze {paths['trace']}",
    ]
    return "\n".join(lines)
