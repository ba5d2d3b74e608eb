"""A report built by hand for the HTML timeline tests: every kind of record the page draws.

The records follow CONTRACT-collectives (spans_kept with ``op``/``group``,
hops_kept with ``kind`` "hop"/"p2p" or none, collectives_kept) exactly, so the
page can be checked before the collective analysis fills them for real. Spans
are listed out of row order on purpose: the page must sort them.

Rows, in the order the page must show them: rank 0 on infer2, infer10 and node0
(hosts in natural order), ranks 1, 2, 3 on node1..node3, rank 10 on node10
(numerically after 3), then processes without a rank: ps with two clocks (two
rows), web with its stamped server spans and, apart, a process with no clock (an unstamped span).
"""

from __future__ import annotations

from typing import Any

from tempotrace_sdk.analysis import AnalysisReport, HostFault

#: 2026-11-30 in TAI ns: beyond a JavaScript number's exact integers, as every real trace is.
T0 = 1_796_065_698_000_000_000
MS = 1_000_000
US = 1_000
LEAP_S = 37  # TAI - UTC today: the unstamped span's OpenTelemetry times are UTC
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
ROWS = ["rank 0 · infer2", "rank 0 · infer10", "rank 0 · node0", "rank 1 · node1", "rank 2 · node2",
        "rank 3 · node3", "rank 10 · node10", "ps · cpu", "ps · sim:ptp", "web · no clock", "web · sim:ptp"]
ITERATIONS = 3
LAST_ARRIVER_RANK = 2


def _span(sid: str, name: str, host: str, rank: int | None, clock: str, start: int, end: int, bound: int | None,
          parent: str = "", op: str | None = None, group: str | None = None) -> dict[str, Any]:
    stamped = bound is not None
    leap = 0 if stamped else LEAP_S * 1_000_000_000
    return {"trace_id": TRACE, "span_id": sid, "parent_id": parent, "name": name, "host": host, "rank": rank,
            "clock": clock, "start_ptp_ns": T0 + start - leap, "start_uncertainty_ns": bound if stamped else 65535,
            "start_quality": "OK" if stamped else "UNKNOWN", "start_lts": 1 if stamped else None,
            "end_ptp_ns": T0 + end - leap, "end_uncertainty_ns": bound, "end_quality": "OK" if stamped else None,
            "stamped": stamped, "op": op, "group": group}


def _decision(method: str, relation: str = "before") -> dict[str, Any]:
    return {"relation": relation, "method": method, "confidence": 1.0 if method != "undecided" else 0.0}


def _hop(send: dict[str, Any], recv: dict[str, Any], sent: int, received: int, method: str, outcome: str,
         kind: str | None) -> dict[str, Any]:
    rec = {"trace_id": TRACE, "send_span": send["span_id"], "recv_span": recv["span_id"], "send_host": send["host"],
           "send_rank": send["rank"], "recv_host": recv["host"], "recv_rank": recv["rank"],
           "send_ptp_ns": T0 + sent, "send_uncertainty_ns": send["start_uncertainty_ns"],
           "recv_ptp_ns": T0 + received, "recv_uncertainty_ns": recv["start_uncertainty_ns"], "matched": True,
           "decision": _decision(method, "undecided" if method == "undecided" else "before"), "outcome": outcome}
    if kind is not None:
        rec["kind"] = kind
    return rec


def synthetic_report() -> AnalysisReport:
    """Three iterations of a 4-rank all-reduce with p2p messages, HTTP hops between ranked-less processes,
    a lying rank 3 and a suspect host ps."""
    spans: list[dict[str, Any]] = []
    hops: list[dict[str, Any]] = []
    colls: list[dict[str, Any]] = []
    hosts = {0: "node0", 1: "node1", 2: "node2", 3: "node3"}
    coll_methods = [("physics", "consistent"), ("lamport", "consistent"), ("physics", "contradiction")]
    for it in range(ITERATIONS):
        base = it * 10 * MS
        members = []
        for rank, host in hosts.items():
            bound = 65535 if rank == 3 else 220
            step = _span(f"{it}{rank}00000000000001", "train_step", host, rank, "sim:ptp", base, base + 8 * MS, bound)
            arrive = base + 1 * MS + (300 * US if rank == LAST_ARRIVER_RANK else rank * 50 * US)
            coll = _span(f"{it}{rank}00000000000002", "nccl:all_reduce", host, rank, "sim:ptp", arrive,
                         base + 3 * MS, bound, step["span_id"], "all_reduce", "0-3")
            spans += [coll, step]
            if not (it == 1 and rank == 3):  # iteration 1: rank 3's span never arrived (incomplete collective)
                members.append({"rank": rank, "host": host, "span_id": coll["span_id"]})
            else:
                spans.remove(coll)
        method, outcome = coll_methods[it]
        colls.append({"trace_id": TRACE, "op": "all_reduce", "group": "0-3", "seq": it, "root": None,
                      "ranks": [0, 1, 2, 3], "missing_ranks": [3] if it == 1 else [], "members": members,
                      "last_arriver": {"rank": LAST_ARRIVER_RANK, "host": hosts[LAST_ARRIVER_RANK]},
                      "decision": _decision(method), "outcome": outcome})
        # torch p2p: rank 0 sends to rank 1 after the all-reduce.
        send = _span(f"{it}0000000000000a3", "send", "node0", 0, "sim:ptp", base + 4 * MS, base + 4 * MS + 40 * US,
                     220, op="send", group="0-1")
        recv = _span(f"{it}1000000000000a3", "recv", "node1", 1, "sim:ptp", base + 4 * MS, base + 4 * MS + 90 * US,
                     220, op="recv", group="0-1")
        spans += [recv, send]
        hops.append(_hop(send, recv, base + 4 * MS + 10 * US, base + 4 * MS + 90 * US,
                         ("physics", "svc", "derived")[it], "consistent", "p2p"))
        # HTTP: ps (its ptp clock) calls web; web renders in an unstamped span.
        call = _span(f"{it}00000000000000c1", "call web", "ps", None, "sim:ptp", base + 5 * MS, base + 7 * MS, 230)
        serve = _span(f"{it}00000000000000c2", "serve", "web", None, "sim:ptp", base + 5 * MS + 200 * US,
                      base + 6 * MS, 230, call["span_id"])
        spans += [serve, call]
        hops.append(_hop(call, serve, base + 5 * MS + 50 * US, base + 5 * MS + 200 * US,
                         "lamport" if it else "undecided", "consistent" if it else "undecided",
                         None if it == 2 else "hop"))
        spans.append(_span(f"{it}0000000000000cc", "poll", "ps", None, "cpu", base + 2 * MS, base + 9 * MS, 65535))
    spans.append(_span("00000000000000d1", "render", "web", None, "", 26 * MS, 27 * MS, None))
    spans.append(_span("00000000000000e1", "generate", "infer10", 0, "sim:ptp", 1 * MS, 25 * MS, 500))
    spans.append(_span("00000000000000e2", "generate", "infer2", 0, "sim:ptp", 2 * MS, 24 * MS, 500))
    spans.append(_span("00000000000000f1", "optimizer", "node10", 10, "sim:ptp", 8 * MS, 9 * MS, 220))
    spans.reverse()  # input order far from row order
    rep = AnalysisReport(source="synthetic", spans=len(spans), traces=1, hops=len(hops), hops_matched=len(hops))
    rep.spans_kept, rep.hops_kept, rep.collectives_kept = spans, hops, colls
    rep.limits = {"window": 100_000, "hop_horizon": 100_000, "dedup": 0}
    rep.edges.total = 40
    rep.edges.decided.update(physics=19, lamport=10, svc=5, derived=1, undecided=3)
    rep.edges.wrong["physics"] = 2
    rep.faults = [
        HostFault("node3", "lying", "physics", 2, 12, ("node0\x000",), 5 * MS, 5 * MS, 65535, rank=3),
        HostFault("ps", "suspect", "physics", 1, 3, ("web",), 10 * US, 10 * US, 230),
    ]
    return rep
