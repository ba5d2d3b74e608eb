"""What ``tempotrace demo --hang`` prints after the job: the top of the analysis' report, its checks, its outputs.

The hang is named by the analysis (the ``HANG:`` block at the top of
``tempotrace analyze``'s text report, analysis/text_hang.py); the demo prints
that block and checks that it names the rank that stopped and the collective
the other ranks' dumps show them pending in (``rank 2 ... never entered
all_reduce #N``, N the one seq they are pending in: with none or several the
check fails), and says so when it does not.
Only when the report names no hang does the demo print the report's first
lines and sum up the dumps' pending ops itself, so that a reader still sees
what the ranks were doing. Values read back from the trace (op, group, dump
reason) and paths are shown through ``_terminal_text.shown``.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import TYPE_CHECKING

from .._terminal_text import MESSAGE_LIMIT, shown

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


def _pending_seqs(result: HangResult) -> set[int]:
    """The seqs of the all_reduces the dumps show ranks pending in: the one the stuck rank never entered, when
    there is exactly one."""
    return {op.seq for op in result.watch.pending if op.op == "all_reduce" and op.seq is not None}


def _names(line: str, rank: int, seq: int) -> bool:
    # The headline's own shape (analysis/text_hang.py): "HANG: rank 2 (host) never entered all_reduce #13 of ...";
    # "ranks 0, 1, 3" or "rank 2 pending" never match it, nor "#130" for "#13".
    return re.match(rf"HANG: rank {rank}(?: \([^;]*\))? never entered all_reduce #{seq}\b", line) is not None


def hang_checks(result: HangResult, stuck: int) -> dict[str, bool]:
    world = result.config.ranks
    seqs = _pending_seqs(result)
    if len(seqs) == 1:
        seq = next(iter(seqs))
        named = NAMED_CHECK.format(rank=stuck, collective=f"all_reduce #{seq}")
        passed = any(_names(block[0], stuck, seq) for block in hang_blocks(result.report_text))
    else:  # which all_reduce it is cannot be told: naming one proves nothing
        named = (NAMED_CHECK.format(rank=stuck, collective="all_reduce") + f" (which one is unknown: the dumps "
                 f"show {'no' if not seqs else len(seqs)} pending all_reduce seq{'s' if len(seqs) != 1 else ''})")
        passed = False
    return {
        DUMPED_CHECK: result.watch.dumped() >= set(range(world)),
        named: passed,
        STOPPED_CHECK: result.stopped,
    }


def _dump_counts(result: HangResult) -> str:
    first = Counter(records[0].reason for records in result.watch.dumps.values())
    return f"{len(result.watch.dumps)}/{result.config.ranks}" + (
        ": " + ", ".join(f"{shown(reason)} {n}" for reason, n in sorted(first.items())) if first else "")


def _pending_summary(result: HangResult) -> str:
    """What the dump records say the ranks were in (only printed when the analysis names no hang)."""
    ranks_in: dict[tuple[str, str | None, int | None], list[int]] = defaultdict(list)
    for op in result.watch.pending:
        ranks_in[(op.op, op.group, op.seq)].append(op.rank)
    parts = [f"ranks {', '.join(map(str, sorted(set(ranks))))} pending in {shown(op)} seq {seq} of group "
             f"{shown(group)}"
             for (op, group, seq), ranks in sorted(ranks_in.items(), key=lambda kv: str(kv[0]))]
    idle = sorted(set(result.watch.dumps) - {op.rank for op in result.watch.pending})
    if idle:
        parts.append(f"rank{'s' if len(idle) > 1 else ''} {', '.join(map(str, idle))} in no op")
    return "; ".join(parts) or "no pending op in any dump"


def render_hang(result: HangResult, stuck: int) -> str:
    paths = {name: shown(path, MESSAGE_LIMIT) for name, path in result.paths.items()}
    text = result.report_text
    blocks = hang_blocks(text)
    lines = ["", f"Hang report (`tempotrace analyze {paths['trace']}`):"]
    for block in blocks:
        lines += [f"  {line}" for line in block]
    if not blocks:
        lines += [f"  {line}" for line in report_head(text)]
        lines.append("  the analysis names no hang; the dump records themselves say: " + _pending_summary(result))
    lines.append("")
    if result.failure is not None:
        lines.append(f"  the wait for the dumps ended when {shown(result.failure, MESSAGE_LIMIT)}")
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
