"""Hand-built torch.distributed op spans as OTLP JSON (the shape tempotrace_sdk.torch writes, spec/
semantic-conventions.md §9), for the collective and point-to-point cases a real 4-rank job does not give
on demand: thousands of ranks, a clock early or late by a chosen amount, a broken counter, a rank that
never joined. tests/torch/test_analysis_collectives.py checks the same analysis on a real gloo job."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from tempotrace_sdk.analysis.groupkey import parse_key
from tempotrace_sdk.analysis.order import span_mask
from tempotrace_sdk.wire.torchkeys import step_ids

from .otlpgen import TAI_UTC_NS, line, span

T0 = 1_800_000_000_000_000_000  #: TAI ns of the first event
TRACE = 0xC0FFEE


def sketch_of(*span_ids: int) -> str:
    """A sketch (64 hex digits) holding these span ids."""
    bits = 0
    for sid in span_ids:
        bits |= span_mask(f"{sid:016x}")
    return f"{bits:064x}"


def _group_rank(group: str, rank: int) -> int:
    """``rank``'s position in the key (without expanding a million-rank key)."""
    before = 0
    for first, last, step in parse_key(group).runs:
        if first <= rank <= last and (rank - first) % step == 0:
            return before + (rank - first) // step
        before += (last - first) // step + 1
    raise ValueError(f"rank {rank} is not in {group}")


def op_span(rank: int, start: int, end: int, *, op: str = "all_reduce", group: str = "0-3", seq: int | None = 0,
            trace: int = TRACE, sid: int | None = None, u: int = 220, quality: str = "OK", host: str | None = None,
            root: int | None = None, lts: int | None = None, end_lts: int | None = None,
            send_lts: int | None = None, recv_lts: int | None = None, missing: list[int] | None = None,
            recv_sketch: str | None = None, sketch: str | None = None, completion: str = "return",
            parent: int = 0, **extra: Any) -> dict[str, Any]:
    """One op span of ``rank``; ``start``/``end`` are ns after T0 on its clock (what it claims, ±``u``).
    ``extra``: more attributes, names after ``tempotrace.`` with "_" for "." in the torch ones
    (``torch_src=0`` is tempotrace.torch.src)."""
    key = parse_key(group)
    a: dict[str, Any] = {
        "tempotrace.rank": rank, "tempotrace.torch.op": op, "tempotrace.torch.group": group,
        "tempotrace.torch.group_rank": _group_rank(group, rank), "tempotrace.torch.group_size": key.size,
        "tempotrace.torch.completion": completion,
        "tempotrace.ptp_ns": T0 + start, "tempotrace.uncertainty_ns": u, "tempotrace.clk_quality": quality,
        "tempotrace.end.ptp_ns": T0 + end, "tempotrace.end.uncertainty_ns": u, "tempotrace.end.clk_quality": quality,
    }
    if seq is not None:
        a["tempotrace.torch.seq"] = seq
    optional = {"tempotrace.torch.root": root, "tempotrace.lts": lts, "tempotrace.end.lts": end_lts,
                "tempotrace.torch.recv.lts": recv_lts, "tempotrace.torch.recv.missing": missing,
                "tempotrace.torch.recv.svc_sketch": recv_sketch, "tempotrace.svc_sketch": sketch}
    a.update({k: v for k, v in optional.items() if v is not None})
    if send_lts is not None:
        a.update({"tempotrace.send.lts": [send_lts], "tempotrace.send.ptp_ns": [T0 + start + 1],
                  "tempotrace.send.uncertainty_ns": [u]})
    for name, value in extra.items():
        a["tempotrace." + name.replace("_", ".", 1) if name.startswith("torch_") else "tempotrace." + name] = value
    span_id = sid if sid is not None else (rank + 1) * 0x1000 + (seq or 0) + 1
    return span(trace, span_id, parent, name=f"torch.{op}", host=host or f"node{rank}",
                start=T0 + start - TAI_UTC_NS, end=T0 + end - TAI_UTC_NS, attrs=a)


def p2p_span(side: str, rank: int, peer: int, start: int, end: int, *, seq: int = 0, tag: int = 0,
             record: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    """A send (``side`` "send") or receive of message ``seq`` between ``rank`` and ``peer``; ``record``: the
    sender's carried record on a receive ({"ptp", "u", "lts", "span"}, ptp in ns after T0)."""
    src, dst = (rank, peer) if side == "send" else (peer, rank)
    extra: dict[str, Any] = {"torch_src": src, "torch_dst": dst, "torch_peer": peer, "torch_tag": tag,
                             "torch_p2p_seq": seq}
    if record is not None:
        extra.update({"torch_remote.ptp_ns": T0 + record["ptp"], "torch_remote.uncertainty_ns": record.get("u", 220),
                      "torch_remote.clk_quality": "OK", "torch_remote.lts": record["lts"],
                      "torch_remote.span_id": f"{record['span']:016x}"})
    sid = kw.pop("sid", (rank + 1) * 0x100000 + (0 if side == "send" else 0x800) + seq + 1)
    return op_span(rank, start, end, op=side, seq=None, sid=sid, **kw, **extra)


def write(path: str, spans: list[dict[str, Any]], per_line: int = 64, resource: dict[str, Any] | None = None,
          mode: str = "w") -> str:
    """Spans as OTLP JSON lines, ``per_line`` a line (``resource``: the Resource's attributes)."""
    with open(path, mode, encoding="utf-8") as fh:
        for i in range(0, len(spans), per_line):
            fh.write(line(spans[i:i + per_line], resource) + "\n")
    return path


MS = 1_000_000


@dataclass
class TorchJob:
    """A training job as ``tempotrace_sdk.torch`` traces it (spec/torch.md §4): ``ranks`` ranks under one job
    id, a ``torch.check_clocks`` span per rank ``check_ns`` before the first step, then ``steps`` steps, each
    one trace (its ids derived from job, restart and step, its step spans children of the virtual parent)
    with ``collectives`` all_reduces per step. Every rank computes ``compute_ns`` before each collective,
    ``slow_rank`` ``slow_ns`` longer; a collective ends ``comm_ns`` after its last rank arrived. ``liar``'s
    clock reads ``liar_ns`` late (early when negative) while claiming 220 ns; ``fail`` = (step, index) makes
    that collective raise on every rank (status ERROR, exception event); ``missing`` = (step, index, rank): that
    rank never joins it."""

    ranks: int = 3
    steps: int = 4
    collectives: int = 2
    job: str = "job-a"
    restart: int = 0
    #: the steps' numbers used this many times before in the job's processes (an epoch loop's enumerate)
    occurrence: int = 0
    compute_ns: int = 3 * MS
    slow_rank: int | None = 1
    slow_ns: int = 5 * MS
    comm_ns: int = 1 * MS
    liar: int | None = None
    liar_ns: int = 10 * MS
    fail: tuple[int, int] | None = None
    missing: tuple[int, int, int] | None = None
    check_ns: int = 5_000 * MS
    step_ns: int = 50 * MS  #: true time between step starts
    error: str = "RuntimeError: Connection closed by peer [10.0.0.2]:29500"
    sids: list[int] = field(default_factory=lambda: [0x7000_0000])

    def _sid(self) -> int:
        self.sids[0] += 1
        return self.sids[0]

    def offset(self, rank: int) -> int:
        return self.liar_ns if rank == self.liar else 0

    def spans(self) -> dict[int, list[dict[str, Any]]]:
        """Each rank's spans, in the order the rank ends them."""
        out: dict[int, list[dict[str, Any]]] = {r: [] for r in range(self.ranks)}
        group = f"0-{self.ranks - 1}" if self.ranks > 2 else ",".join(map(str, range(self.ranks)))
        for r in range(self.ranks):  # the clock check, seconds before training (its own trace per rank)
            trace = int.from_bytes(hashlib.blake2b(f"{self.job}/{r}".encode(), digest_size=16).digest(), "big")
            out[r].append(span(trace, self._sid(), name="torch.check_clocks", host=f"node{r}",
                               start=T0 - self.check_ns + self.offset(r) - TAI_UTC_NS,
                               end=T0 - self.check_ns + 30 * MS + self.offset(r) - TAI_UTC_NS,
                               attrs={"tempotrace.rank": r, "tempotrace.torch.clock_check.ref_rank": 0}))
        seq = 0
        for step in range(self.steps):
            trace, virtual = step_ids(self.job, self.restart, step, self.occurrence)
            begin = step * self.step_ns
            step_sids = {r: self._sid() for r in range(self.ranks)}
            now = dict.fromkeys(range(self.ranks), begin)
            for k in range(self.collectives):
                ranks = [r for r in range(self.ranks) if (step, k, r) != self.missing]
                arrive = {r: now[r] + self.compute_ns + (self.slow_ns if r == self.slow_rank else 0) for r in ranks}
                end = max(arrive.values()) + self.comm_ns
                for r in ranks:
                    o = self.offset(r)
                    failed = (step, k) == self.fail
                    sp = op_span(r, arrive[r] + o, end + o, group=group, seq=seq, trace=trace, sid=self._sid(),
                                 parent=step_sids[r], completion="error" if failed else "return")
                    if failed:
                        kind, _, said = self.error.partition(": ")
                        sp["status"] = {"code": 2, "message": self.error}
                        sp["events"] = [{"name": "exception", "timeUnixNano": sp["endTimeUnixNano"], "attributes": [
                            {"key": "exception.type", "value": {"stringValue": kind}},
                            {"key": "exception.message", "value": {"stringValue": said}}]}]
                    out[r].append(sp)
                    now[r] = end
                seq += 1
            for r in range(self.ranks):
                o = self.offset(r)
                out[r].append(span(trace, step_sids[r], virtual, name="torch.step", host=f"node{r}",
                                   start=T0 + begin + o - TAI_UTC_NS, end=T0 + max(now.values()) + MS + o - TAI_UTC_NS,
                                   attrs={"tempotrace.rank": r, "tempotrace.torch.step": step,
                                          **({"tempotrace.torch.step_occurrence": self.occurrence}
                                             if self.occurrence else {}),
                                          "tempotrace.torch.carriage": "step", "tempotrace.ptp_ns": T0 + begin + o,
                                          "tempotrace.uncertainty_ns": 220, "tempotrace.clk_quality": "OK",
                                          "tempotrace.end.ptp_ns": T0 + max(now.values()) + MS + o,
                                          "tempotrace.end.uncertainty_ns": 220, "tempotrace.end.clk_quality": "OK"}))
        return out

    def write(self, path: str, mode: str = "w", per_line: int = 16) -> str:
        """Every rank's spans, a rank's lines carrying its job on the Resource (as configure() writes them)."""
        for r, spans in self.spans().items():
            write(path, spans, per_line, {"tempotrace.rank": r, "tempotrace.job_id": self.job,
                                          "tempotrace.restart": self.restart}, mode="a" if r or mode == "a" else "w")
        return path
