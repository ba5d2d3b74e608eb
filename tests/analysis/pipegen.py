"""A simulated torch pipeline job as OTLP JSON, with its ground truth (spec/analysis.md §2.8): per step (one
trace) every rank's step span; rank 0 sends to 1, each rank receives from the one before, works, sends to the
next; then an all_reduce and a broadcast from rank 0. Times are simulated in true ns and each rank reads them
with its own clock error (honest: within its claimed bound; a liar beyond it); each rank's Lamport counter
ticks at every event (one counter per process). ``carriage`` "none" carries nothing between ranks (the SDK's
default for point-to-point ops, spec/torch.md §3); "step+p2p" gives every receive its sender's record, merged
(``tempotrace.torch.remote.*`` and ``recv.lts``), as the side message does.

``truth`` holds, for every event the spans record, its true time: a decision the report makes on any pair
can be checked against it (``true_order``)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from tempotrace_sdk.wire.torchkeys import step_ids

from .otlpgen import TAI_UTC_NS, span
from .torchgen import T0, op_span, p2p_span, write

US = 1000
JOB = "pipe-job"


@dataclass
class Pipeline:
    ranks: int = 4
    steps: int = 3
    u: int = 60 * US  #: every clock's claimed bound: wider than a message's latency, so physics is silent
    liar: int | None = None
    liar_ns: int = 0  #: the liar's error, beyond its claimed bound
    carriage: str = "none"
    drop: frozenset[int] = frozenset()  #: ranks whose spans never reach the input
    latency: int = 30 * US
    work: int = 200 * US
    seed: int = 0
    truth: dict[tuple[str, str], int] = field(default_factory=dict)  #: (span id, "start" | "end") -> true ns

    def __post_init__(self) -> None:
        rng = random.Random(self.seed)
        # Honest errors within a third of the bound; the liar's beyond it.
        self.error = {r: rng.randint(-self.u // 3, self.u // 3) for r in range(self.ranks)}
        if self.liar is not None:
            self.error[self.liar] = self.liar_ns
        self.lts = dict.fromkeys(range(self.ranks), 0)
        self.sid = 0x10_0000

    def _tick(self, rank: int) -> int:
        self.lts[rank] += 1
        return self.lts[rank]

    def _next_sid(self) -> int:
        self.sid += 1
        return self.sid

    def _stamp(self, rank: int, true_ns: int) -> int:
        return true_ns + self.error[rank]  # ns after T0, on the rank's clock

    def spans(self) -> dict[int, list[dict[str, Any]]]:
        out: dict[int, list[dict[str, Any]]] = {r: [] for r in range(self.ranks)}
        group = f"0-{self.ranks - 1}"
        seq = 0
        for step in range(self.steps):
            trace, virtual = step_ids(JOB, 0, step, 0)
            begin = step * 10_000 * US
            step_sid = {r: self._next_sid() for r in range(self.ranks)}
            step_lts = {r: self._tick(r) for r in range(self.ranks)}
            now = dict.fromkeys(range(self.ranks), begin + 10 * US)
            sent: dict[int, tuple[int, int, int]] = {}  # rank -> (true send start, record lts, send span id)
            for r in range(self.ranks):
                if r > 0:  # receive from r - 1: posted now, completes after the send arrives
                    post = now[r]
                    start_lts = self._tick(r)
                    sender_start, record_lts, sender_sid = sent[r - 1]
                    end = max(post, sender_start + self.latency) + 5 * US
                    kw: dict[str, Any] = {}
                    if self.carriage == "step+p2p":
                        recv_lts = max(self.lts[r], record_lts) + 1
                        self.lts[r] = recv_lts
                        kw = {"record": {"ptp": self._stamp(r - 1, sender_start + 1), "u": self.u, "lts": record_lts,
                                         "span": sender_sid}, "recv_lts": recv_lts}
                    sid = self._next_sid()
                    out[r].append(p2p_span("recv", r, r - 1, self._stamp(r, post), self._stamp(r, end), seq=step,
                                           group=group, trace=trace, sid=sid, parent=step_sid[r], u=self.u,
                                           lts=start_lts, end_lts=self._tick(r), **kw))
                    self._truth(sid, post, end)
                    now[r] = end + self.work
                if r < self.ranks - 1:  # send to r + 1
                    start = now[r]
                    start_lts = self._tick(r)
                    record_lts = self._tick(r) if self.carriage == "step+p2p" else 0
                    end = start + self.latency + 2 * US
                    sid = self._next_sid()
                    extra = {"send_lts": record_lts} if self.carriage == "step+p2p" else {}
                    out[r].append(p2p_span("send", r, r + 1, self._stamp(r, start), self._stamp(r, end), seq=step,
                                           group=group, trace=trace, sid=sid, parent=step_sid[r], u=self.u,
                                           lts=start_lts, end_lts=self._tick(r), **extra))
                    self._truth(sid, start, end)
                    sent[r] = (start, record_lts, sid)
                    now[r] = end
            for op, root in (("all_reduce", None), ("broadcast", 0)):
                arrive = {r: now[r] + (r + 1) * 7 * US for r in range(self.ranks)}
                end = max(arrive.values()) + 40 * US
                for r in range(self.ranks):
                    sid = self._next_sid()
                    out[r].append(op_span(r, self._stamp(r, arrive[r]), self._stamp(r, end), op=op, group=group,
                                          seq=seq, trace=trace, sid=sid, parent=step_sid[r], u=self.u, root=root,
                                          lts=self._tick(r), end_lts=self._tick(r)))
                    self._truth(sid, arrive[r], end)
                    now[r] = end
                seq += 1
            for r in range(self.ranks):
                o, last = self.error[r], max(now.values()) + 10 * US
                out[r].append(span(trace, step_sid[r], virtual, name="torch.step", host=f"node{r}",
                                   start=T0 + begin + o - TAI_UTC_NS, end=T0 + last + o - TAI_UTC_NS, attrs={
                                       "tempotrace.rank": r, "tempotrace.torch.step": step,
                                       "tempotrace.torch.carriage": self.carriage,
                                       "tempotrace.ptp_ns": T0 + begin + o, "tempotrace.uncertainty_ns": self.u,
                                       "tempotrace.clk_quality": "OK", "tempotrace.lts": step_lts[r],
                                       "tempotrace.end.ptp_ns": T0 + last + o, "tempotrace.end.uncertainty_ns": self.u,
                                       "tempotrace.end.clk_quality": "OK", "tempotrace.end.lts": self._tick(r)}))
                self._truth(step_sid[r], begin, last)
        return {r: spans for r, spans in out.items() if r not in self.drop}

    def _truth(self, sid: int, start: int, end: int) -> None:
        self.truth[(f"{sid:016x}", "start")] = start
        self.truth[(f"{sid:016x}", "end")] = end

    def write(self, path: str) -> str:
        """Every rank's spans (Resource: rank and job), rank by rank."""
        for i, (r, spans) in enumerate(self.spans().items()):
            write(path, spans, 16, {"tempotrace.rank": r, "tempotrace.job_id": JOB, "tempotrace.restart": 0},
                  mode="a" if i else "w")
        return path

    def true_order(self, a: tuple[str, str], b: tuple[str, str]) -> int:
        """-1 when event a truly happened before b, 1 after, 0 at the same ns."""
        ta, tb = self.truth[a], self.truth[b]
        return -1 if ta < tb else (1 if ta > tb else 0)
