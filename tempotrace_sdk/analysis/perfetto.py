"""Chrome trace-event JSON for ui.perfetto.dev (spec/analysis.md §6.2).

One process track per host, one thread per rank; each span a complete ("X")
event with its stamps, bounds and Lamport values in args (and its torch op and
group); each hop and each torch point-to-point message a flow arrow ("s" ->
"f") from the sending span to the receiving span, with the decision (method,
relation, confidence) in args; each collective one flow through its members'
spans in arrival order ("s" at the first arriver's start, "t" at each next
one's, "f" at the last arriver's), with the claim's decision, the outcome and
the last arriver in args. Times are µs relative to the
earliest stamp, since the format's ``ts`` is a double in µs and absolute TAI
nanoseconds would lose precision.
"""

from __future__ import annotations

from typing import Any

from .report import AnalysisReport

__all__ = ["perfetto_trace"]


def perfetto_trace(report: AnalysisReport) -> dict[str, Any]:
    spans = report.spans_kept
    t0 = min((s["start_ptp_ns"] for s in spans), default=0)
    pids: dict[str, int] = {}
    events: list[dict[str, Any]] = []

    def pid_of(host: str) -> int:
        pid = pids.get(host)
        if pid is None:
            pid = pids[host] = len(pids) + 1
            events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": host}})
        return pid

    where: dict[str, tuple[int, int]] = {}
    named: set[tuple[int, int]] = set()
    for s in spans:
        pid = pid_of(s["host"])
        tid = int(s["rank"]) if s["rank"] is not None else 0
        if (pid, tid) not in named:
            named.add((pid, tid))
            label = f"rank {tid}" if s["rank"] is not None else s["host"]
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": label}})
        where[s["span_id"]] = (pid, tid)
        start = (s["start_ptp_ns"] - t0) / 1000.0
        dur = max(0.0, (s["end_ptp_ns"] - s["start_ptp_ns"]) / 1000.0)
        events.append({
            "ph": "X", "name": s["name"], "cat": "span", "pid": pid, "tid": tid, "ts": start, "dur": dur,
            "args": {
                "span_id": s["span_id"], "trace_id": s["trace_id"], "parent_id": s["parent_id"],
                "start_uncertainty_ns": s["start_uncertainty_ns"], "start_quality": s["start_quality"],
                "start_lts": s["start_lts"], "end_uncertainty_ns": s["end_uncertainty_ns"],
                "end_quality": s["end_quality"], "clock": s["clock"], "tempotrace_stamped": s["stamped"],
                "torch_op": s.get("op"), "torch_group": s.get("group"),
            },
        })
    for n, h in enumerate(report.hops_kept, 1):
        send_at = where.get(h["send_span"])
        recv_at = where.get(h["recv_span"])
        if send_at is None or recv_at is None or h["send_ptp_ns"] is None or h["recv_ptp_ns"] is None:
            continue
        d = h["decision"]
        args = {"method": d["method"], "relation": d["relation"], "confidence": d["confidence"],
                "outcome": h["outcome"], "send_uncertainty_ns": h["send_uncertainty_ns"],
                "recv_uncertainty_ns": h["recv_uncertainty_ns"]}
        kind = h.get("kind", "hop")
        name = f"{kind} ({d['method']})"
        events.append({"ph": "s", "id": n, "name": name, "cat": kind, "pid": send_at[0], "tid": send_at[1],
                       "ts": (h["send_ptp_ns"] - t0) / 1000.0, "args": args})
        events.append({"ph": "f", "bp": "e", "id": n, "name": name, "cat": kind, "pid": recv_at[0],
                       "tid": recv_at[1], "ts": (h["recv_ptp_ns"] - t0) / 1000.0, "args": args})
    flow = len(report.hops_kept)
    for c in report.collectives_kept:
        chain = [(where[m["span_id"]], m["start_ptp_ns"]) for m in c["members"] if m["span_id"] in where]
        if len(chain) < 2:
            continue
        flow += 1
        d = c["decision"]
        name = f"{c['op']} #{c['seq']} ({d['method']})"
        args = {"op": c["op"], "group": c["group"], "seq": c["seq"], "method": d["method"],
                "relation": d["relation"], "outcome": c["outcome"], "last_arriver": c["last_arriver"],
                "missing_ranks": c["missing_ranks"], "spread_ns": c["spread_ns"]}
        for k, ((pid, tid), ts) in enumerate(chain):
            ph = "s" if k == 0 else ("f" if k == len(chain) - 1 else "t")
            event = {"ph": ph, "id": flow, "name": name, "cat": "collective", "pid": pid, "tid": tid,
                     "ts": (ts - t0) / 1000.0, "args": args}
            if ph != "s":
                event["bp"] = "e"
            events.append(event)
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"tempotrace": report.summary(), "t0_ptp_ns": t0, "source": report.source},
    }
