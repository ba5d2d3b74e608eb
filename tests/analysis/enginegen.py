"""Traces for the engine-agreement tests (issue 24: every engine's report equals the reference's): a
Hypothesis strategy drawing what the analysis must get the same whichever way it runs — honest clocks, a
liar, a coarse clock, a saturated bound; torch collectives (a failure, a rank that never joined), pipeline
sends and receives (one whose sender is lost), HTTP-style hops made with the real SDK; lines read in
another order, delivered twice, torn; a window small enough to split traces into parts.

``honest`` says whether every clock in the drawn trace keeps its claims: then no known edge may be
decided wrongly (the promise), whatever the engine.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from .otlpgen import line
from .torchgen import MS, TorchJob, p2p_span
from .tracegen import write_trace

#: sim clock profiles (clocks/simulated.py) and whether each keeps its claims
HTTP_CLOCKS = {"sim:ptp": True, "sim:ntp": True, "sim:liar": False, "sim:unsynced": True}


@dataclass
class Drawn:
    """A drawn trace: its OTLP JSON lines (some perhaps torn or repeated), the window to read it with, and
    whether every clock in it is honest."""

    lines: list[str]
    window: int
    honest: bool

    def write(self, path: str) -> str:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("\n".join(self.lines) + "\n")
        return path


@st.composite
def torch_job(draw: st.DrawFn, job: str) -> tuple[list[str], bool]:
    """A TorchJob's lines: 2-5 ranks, 1-3 steps of 1-3 all_reduces, maybe a liar, a failure, a missing rank."""
    ranks = draw(st.integers(2, 5))
    steps = draw(st.integers(1, 3))
    collectives = draw(st.integers(1, 3))
    liar = draw(st.one_of(st.none(), st.integers(0, ranks - 1)))
    fail = draw(st.one_of(st.none(), st.tuples(st.integers(0, steps - 1), st.integers(0, collectives - 1))))
    missing = draw(st.one_of(st.none(), st.tuples(st.integers(0, steps - 1), st.integers(0, collectives - 1),
                                                  st.integers(0, ranks - 1))))
    tj = TorchJob(ranks=ranks, steps=steps, collectives=collectives, job=job, liar=liar,
                  liar_ns=draw(st.sampled_from([-20 * MS, 7 * MS])), fail=fail, missing=missing,
                  slow_rank=draw(st.one_of(st.none(), st.integers(0, ranks - 1))),
                  occurrence=draw(st.integers(0, 1)))
    per_line = draw(st.sampled_from([3, 16]))
    lines = []
    for r, spans in tj.spans().items():
        resource = {"tempotrace.rank": r, "tempotrace.job_id": job, "tempotrace.restart": 0}
        lines += [line(spans[i:i + per_line], resource) for i in range(0, len(spans), per_line)]
    return lines, liar is None


@st.composite
def pipeline(draw: st.DrawFn, trace: int) -> tuple[list[str], bool]:
    """Messages along a pipeline of 2-4 ranks (send ends before its receive ends, on honest clocks), a
    receiver's clock perhaps late by more than its bound, a send perhaps lost."""
    ranks = draw(st.integers(2, 4))
    messages = draw(st.integers(1, 4))
    late = draw(st.one_of(st.none(), st.integers(1, ranks - 1)))
    lost = draw(st.one_of(st.none(), st.integers(0, messages - 1)))
    spans: list[dict[str, Any]] = []
    t = 0
    for m in range(messages):
        for src in range(ranks - 1):
            dst = src + 1
            o_src = -5 * MS if src == late else 0
            o_dst = -5 * MS if dst == late else 0
            if m != lost:
                spans.append(p2p_span("send", src, dst, t + o_src, t + 40_000 + o_src, seq=m, trace=trace,
                                      group=f"0-{ranks - 1}" if ranks > 2 else "0,1"))
            spans.append(p2p_span("recv", dst, src, t + 10_000 + o_dst, t + 90_000 + o_dst, seq=m, trace=trace,
                                  group=f"0-{ranks - 1}" if ranks > 2 else "0,1"))
            t += 200_000
    per_line = draw(st.sampled_from([2, 8]))
    return [line(spans[i:i + per_line]) for i in range(0, len(spans), per_line)], late is None


def _http(clocks: dict[str, str], steps: int, seed: int) -> list[str]:
    # the SDK draws its ids from the global random: seeded per example, then put back (Hypothesis replays)
    saved = random.getstate()
    random.seed(seed)
    try:
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "http.jsonl")
            write_trace(path, clocks, steps)
            with open(path, encoding="utf-8") as fh:
                return [ln.rstrip("\n") for ln in fh if ln.strip()]
    finally:
        random.setstate(saved)


@st.composite
def http_trace(draw: st.DrawFn) -> tuple[list[str], bool]:
    """A coordinator calling 2-3 workers, each calling the next, over the real SDK and propagator."""
    n = draw(st.integers(3, 4))
    specs = draw(st.lists(st.sampled_from(sorted(HTTP_CLOCKS)), min_size=n, max_size=n))
    clocks = {f"h{i}": spec for i, spec in enumerate(specs)}
    lines = _http(clocks, draw(st.integers(1, 2)), draw(st.integers(0, 2**32)))
    return lines, all(HTTP_CLOCKS[s] for s in specs)


@st.composite
def drawn_trace(draw: st.DrawFn) -> Drawn:
    """Pieces of the kinds above, their lines interleaved, some delivered twice, one perhaps torn."""
    pieces = [draw(torch_job("job-a"))]
    if draw(st.booleans()):
        pieces.append(draw(pipeline(0xBEEF)))
    if draw(st.booleans()):
        pieces.append(draw(http_trace()))
    lines = [ln for piece, _ in pieces for ln in piece]
    honest = all(h for _, h in pieces)
    lines = draw(st.permutations(lines)) if draw(st.booleans()) else lines
    for _ in range(draw(st.integers(0, 2))):  # a line delivered again, later (an exporter's retry)
        lines.append(draw(st.sampled_from(lines)))
    if draw(st.integers(0, 3)) == 0:  # a line torn by a writer killed mid-write
        at = draw(st.integers(0, len(lines) - 1))
        lines[at] = lines[at][: max(1, len(lines[at]) // 2)]
    window = draw(st.sampled_from([7, 40, 100_000]))
    return Drawn(lines, window, honest)


def spans_in(lines: list[str]) -> int:
    """Span objects in the lines that parse (a torn one does not)."""
    n = 0
    for text in lines:
        try:
            doc = json.loads(text)
        except ValueError:
            continue
        n += sum(len(ss.get("spans", [])) for rs in doc.get("resourceSpans", []) for ss in rs.get("scopeSpans", []))
    return n
