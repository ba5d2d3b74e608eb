"""How the demo writes durations and decision counts (shared by its progress lines and summaries)."""

from __future__ import annotations

__all__ = ["labels", "offset_text"]


def labels(counts: dict[str, int]) -> str:
    """'physics a, lamport b, svc c, undecided d[, contradiction e]': decisions on some edges, by label."""
    main = ("physics", "lamport", "svc", "undecided")
    return ", ".join([f"{k} {counts.get(k, 0):,}" for k in main] + [f"{k} {v:,}" for k, v in counts.items()
                                                                     if k not in main])


def offset_text(ns: float) -> str:
    if abs(ns) >= 1_000_000:
        return f"{ns / 1e6:+.3f} ms"
    if abs(ns) >= 1_000:
        return f"{ns / 1e3:+,.0f} µs"
    return f"{ns:+.0f} ns"
