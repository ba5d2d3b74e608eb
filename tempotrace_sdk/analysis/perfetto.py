"""Chrome trace-event JSON for ui.perfetto.dev (spec/analysis.md §6.2).

One process track per host, one thread per rank; each span a complete ("X")
event with its stamps, bounds and Lamport values in args (and its torch op and
group); each hop and each torch point-to-point message a flow arrow ("s" ->
"f") from the sending span to the receiving span, with the decision (method,
relation, confidence) in args; each collective one flow through its members'
spans in arrival order ("s" at the first arriver's start, "t" at each next
one's, "f" at the last arriver's), with the claim's decision, the outcome and
the last arriver in args; a hang's wavefront (hang.py) an instant event
("i", category ``hang``) per pending or failed rank at its entry and per
suspect at its last completed op, and a global one named by the text's HANG
line. Times are µs relative to the earliest stamp, since the format's ``ts``
is a double in µs and absolute TAI nanoseconds would lose precision.
"""

from __future__ import annotations

from typing import Any

from .report import AnalysisReport
from .text_hang import headline, jobs_named

__all__ = ["perfetto_trace"]


def perfetto_trace(report: AnalysisReport) -> dict[str, Any]:
    spans = report.spans_kept
    hang = report.hang()
    marks = _hang_marks(hang)
    t0 = min([*(s["start_ptp_ns"] for s in spans), *(m[3] for m in marks)], default=0)
    pids: dict[str, int] = {}
    events: list[dict[str, Any]] = []

    def pid_of(host: str) -> int:
        pid = pids.get(host)
        if pid is None:
            pid = pids[host] = len(pids) + 1
            events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": host}})
        return pid

    named: set[tuple[int, int]] = set()

    def track(host: str, rank: int | None) -> tuple[int, int]:
        pid = pid_of(host)
        tid = int(rank) if rank is not None else 0
        if (pid, tid) not in named:
            named.add((pid, tid))
            label = f"rank {tid}" if rank is not None else host
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": label}})
        return pid, tid

    where: dict[str, tuple[int, int]] = {}
    for s in spans:
        pid, tid = where[s["span_id"]] = track(s["host"], s["rank"])
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
    for name, host, rank, at, args in marks:  # the hang report: where each rank of a wavefront stands
        pid, tid = track(host, rank)
        events.append({"ph": "i", "s": "t", "name": name, "cat": "hang", "pid": pid, "tid": tid,
                       "ts": (at - t0) / 1000.0, "args": args})
    for line, at, args in _hang_banners(hang):
        events.append({"ph": "i", "s": "g", "name": line, "cat": "hang", "pid": 0, "tid": 0,
                       "ts": (at - t0) / 1000.0, "args": args})
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"tempotrace": report.summary(), "t0_ptp_ns": t0, "source": report.source},
    }


Mark = tuple[str, str, int | None, int, dict[str, Any]]  # name, host, rank, TAI ns, args


def _hang_marks(hang: dict[str, Any] | None) -> list[Mark]:
    """An instant per pending or failed rank of a wavefront (at its entry) and per suspect (at its last
    completed op's last event), on the rank's track."""
    out: list[Mark] = []
    for g in hang["groups"] if hang is not None else ():
        w = g["wavefront"]
        if w is None:
            continue
        what = f"{w['op'] or 'collective'} #{w['seq']}"
        base = {"group": g["group"], "seq": w["seq"], "op": w["op"], "verdict": w["verdict"]}
        for state in ("pending", "failed"):
            for m in w[state]["members"]:
                out.append((f"{state} in {what}", m["host"], m["rank"], m["entered"]["tai_ns"],
                            {**base, "rank": m["rank"], "state": state, "entered": m["entered"]}))
        for s in w["never_entered"]["ranks"]:
            last = s["last_completed"]
            if last is not None:
                out.append((f"never entered {what} (last {last['event']} #{last['seq']})", s["host"] or "?",
                            s["rank"], last["tai_ns"], {**base, "rank": s["rank"], "state": "never_entered",
                                                        "last_completed": last}))
    return out


def _hang_banners(hang: dict[str, Any] | None) -> list[tuple[str, int, dict[str, Any]]]:
    """A global instant per wavefront, named by its text line, at its ``since`` (else its latest mark)."""
    if hang is None:
        return []
    out = []
    jobs = jobs_named(hang)
    for g in hang["groups"]:
        w = g["wavefront"]
        if w is None:
            continue
        times = [m["entered"]["tai_ns"] for k in ("pending", "failed") for m in w[k]["members"]]
        times += [s["last_completed"]["tai_ns"] for s in w["never_entered"]["ranks"] if s["last_completed"]]
        at = w["since"]["tai_ns"] if w["since"] is not None else max(times, default=0)
        out.append((headline(g, jobs), at, {"group": g["group"], "seq": w["seq"], "op": w["op"],
                                             "verdict": w["verdict"],
                                             "never_entered": [s["rank"] for s in w["never_entered"]["ranks"]],
                                             "pending": [m["rank"] for m in w["pending"]["members"]],
                                             "failed": [m["rank"] for m in w["failed"]["members"]]}))
    return out
