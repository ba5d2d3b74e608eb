"""Words and numbers of the HTML timeline: times, bounds, tooltips (spec/analysis.md §6.3).

Formatted in Python from exact integers, so a tooltip says what the record
holds to the nanosecond; the page's script only shows these strings.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from ..clocks.leapseconds import tai_to_utc_ns
from ..wire.layout import UNCERTAINTY_SATURATED

if TYPE_CHECKING:
    from .report import AnalysisReport

__all__ = ["bound_text", "calendar", "fault_verdicts", "hop_tip", "relative", "span_tip"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def relative(ns: int) -> str:
    """ns from the origin as signed milliseconds, every digit kept: +12.345678 ms."""
    sign = "-" if ns < 0 else "+"
    ms, rest = divmod(abs(ns), 1_000_000)
    return f"{sign}{ms:,}.{rest:06d} ms"


def bound_text(ns: int, bare: bool = False) -> str:
    """A bound (±, saturated shown as ≥) or, ``bare``, a duration, in the unit its size asks for."""
    if not bare and ns >= UNCERTAINTY_SATURATED:
        return f"≥{UNCERTAINTY_SATURATED:,} ns (saturated)"
    sign = "-" if ns < 0 else "" if bare else "±"
    ns = abs(ns)
    if ns < 1_000:
        return f"{sign}{ns} ns"
    if ns < 1_000_000:
        return f"{sign}{ns / 1e3:.3f} µs"
    if ns < 1_000_000_000:
        return f"{sign}{ns / 1e6:.6f} ms"
    return f"{sign}{ns / 1e9:.9f} s"


def calendar(tai_ns: int) -> str:
    """The TAI instant as a TAI calendar date and the UTC one, to the ns."""
    def fmt(ns: int) -> str:
        s, frac = divmod(ns, 1_000_000_000)
        return (_EPOCH + timedelta(seconds=s)).strftime("%Y-%m-%d %H:%M:%S") + f".{frac:09d}"
    return f"{fmt(tai_ns)} TAI = {fmt(tai_to_utc_ns(tai_ns))} UTC"


def fault_verdicts(report: AnalysisReport) -> dict[tuple[str, int | None], str]:
    """(host, rank) -> "lying" or "suspect" for each clock the fault ledger names (lying wins)."""
    out: dict[tuple[str, int | None], str] = {}
    for f in report.faults:
        key = (f.host, f.rank)
        if out.get(key) != "lying":
            out[key] = f.verdict
    return out


def _stamp(what: str, at: int, bound: int | None, quality: str | None) -> str:
    if bound is None:
        return f"{what} {relative(at)} (OpenTelemetry time, no bound)"
    return f"{what} {relative(at)} {bound_text(bound)} ({quality})"


def span_tip(s: dict[str, Any], where: str, start: int, end: int, su: int | None, eu: int | None) -> str:
    """A span's tooltip: name, collective, clock, both stamps with their bounds, length, ids."""
    lines = [s["name"]]
    if s.get("op"):
        lines.append(f"collective {s['op']} group {s.get('group')}")
    lines.append(f"{where} · clock {s.get('clock') or '?'}")
    lines.append(_stamp("start", start, su, s.get("start_quality")))
    lines.append(_stamp("end", end, eu, s.get("end_quality")))
    lines.append(f"lasted {bound_text(end - start, bare=True)}")
    lines.append(f"span {s['span_id']} · trace {s['trace_id']}")
    return "\n".join(lines)


def _end(host: str, rank: int | None) -> str:
    return host if rank is None else f"rank {rank} ({host})"


def hop_tip(h: dict[str, Any], kind: str, origin: int) -> str:
    """A hop's or p2p message's tooltip: who to whom, both readings, the decision."""
    d = h["decision"]
    what = "torch p2p message" if kind == "p2p" else "hop"
    lines = [f"{what} {_end(h['send_host'], h['send_rank'])} → {_end(h['recv_host'], h['recv_rank'])}"]
    for side, label in (("send", "sent"), ("recv", "received")):
        bound = h[f"{side}_uncertainty_ns"]
        at = relative(h[f"{side}_ptp_ns"] - origin)
        lines.append(f"{label} {at}" + ("" if bound is None else f" {bound_text(bound)}"))
    confidence = d.get("confidence")
    lines.append(f"{d['relation']} by {d['method']}" + ("" if confidence is None else f" (confidence {confidence})")
                 + f": {h['outcome']}")
    if not h.get("matched", True):
        lines.append("not matched to a header the sender's span recorded")
    return "\n".join(lines)
