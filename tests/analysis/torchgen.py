"""Hand-built torch.distributed op spans as OTLP JSON (the shape tempotrace_sdk.torch writes, spec/
semantic-conventions.md §9), for the collective and point-to-point cases a real 4-rank job does not give
on demand: thousands of ranks, a clock early or late by a chosen amount, a broken counter, a rank that
never joined. tests/torch/test_analysis_collectives.py checks the same analysis on a real gloo job."""

from __future__ import annotations

from typing import Any

from tempotrace_sdk.analysis.groupkey import parse_key
from tempotrace_sdk.analysis.order import span_mask

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
            **extra: Any) -> dict[str, Any]:
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
    return span(trace, span_id, name=f"torch.{op}", host=host or f"node{rank}",
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


def write(path: str, spans: list[dict[str, Any]], per_line: int = 64) -> str:
    """Spans as OTLP JSON lines, ``per_line`` a line."""
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(0, len(spans), per_line):
            fh.write(line(spans[i:i + per_line]) + "\n")
    return path
