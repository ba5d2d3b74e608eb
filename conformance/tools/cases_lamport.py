"""Lamport counter vectors (spec §10), from reference.py.

Each case lists its ops; the expected values come from
``reference.lamport_sequence``. New cases go at the end (tcIds never move).
"""

from __future__ import annotations

from typing import Any

from reference import LAMPORT_MAX_AHEAD, LTS_MAX, M64, lamport_sequence

BOUND = LAMPORT_MAX_AHEAD


def _lamport(comment: str, flags: list[str], start: int, *ops: str | int) -> dict[str, Any]:
    seq = [{"op": "tick"} if op == "tick" else {"op": "merge", "remote": str(op)} for op in ops]
    case: dict[str, Any] = {"comment": comment, "flags": ["Lamport", *flags], "start": str(start), "ops": seq}
    outcome = lamport_sequence(start, seq)
    if outcome is None:  # the start value itself is refused: no op runs
        return {**case, "result": "invalid", "errorClass": "LTS_RANGE"}
    results, final, saturated = outcome
    refused = any("errorClass" in r for r in results)
    case.update(results=results, final=str(final), saturated=saturated)
    if refused:
        return {**case, "result": "invalid", "errorClass": "LTS_RANGE"}
    return {**case, "result": "valid"}


def lamport() -> list[dict[str, Any]]:
    top = LTS_MAX
    return [
        _lamport("three ticks from 0", [], 0, "tick", "tick", "tick"),
        _lamport("merge of a larger remote: remote + 1", [], 0, "tick", 10),
        _lamport("merge of a smaller remote: local + 1", [], 20, 3),
        _lamport("merge of an equal remote: + 1", [], 7, 7),
        _lamport("merge of 0 from 0", [], 0, 0),
        _lamport("ticks and merges interleaved", [], 5, "tick", 100, "tick", 50, 101, "tick"),
        _lamport("remote 2^63 refused, counter unchanged, next tick continues", ["LamportRefused"], 4, 2**63, "tick"),
        _lamport("remote 2^64-1 refused", ["LamportRefused"], 4, M64),
        _lamport("remote 2^64 refused", ["LamportRefused"], 4, 2**64),
        _lamport("negative remote refused", ["LamportRefused"], 4, -1, "tick"),
        _lamport("tick up to 2^63-1 then saturate", ["LamportSaturation"], top - 2, "tick", "tick", "tick"),
        _lamport("start at 2^63-1: the first tick saturates", ["LamportSaturation"], top, "tick"),
        # Before the bound of spec §10.1 these two merged and saturated; from a
        # fresh counter the remote is now far too far ahead to be merged.
        _lamport(
            "remote 2^63-1 from a fresh counter: over the bound, not merged (a plain tick), not saturated",
            ["LamportSaturation", "LamportBound"],
            0,
            top,
            "tick",
        ),
        _lamport("remote 2^63-2 from a fresh counter: over the bound, not merged", ["LamportBound"], 0, top - 1),
        _lamport(
            "refusal after saturation leaves the counter saturated",
            ["LamportSaturation", "LamportRefused"],
            top,
            "tick",
            2**63,
        ),
        # -- appended: the start value (spec §10) -------------------------------------
        _lamport("start 2^63: the whole sequence is refused", ["LamportStart"], 2**63, "tick"),
        _lamport("start -1: the whole sequence is refused", ["LamportStart"], -1, "tick"),
        _lamport("start 2^64+5: refused, not wrapped to 5", ["LamportStart"], 2**64 + 5, "tick"),
        # -- appended: the merge bound LAMPORT_MAX_AHEAD = 2^44 (spec §10.1) -------------
        _lamport("remote exactly 2^44 ahead of 0: merged", ["LamportBound"], 0, BOUND, "tick"),
        _lamport("remote 2^44+1 ahead of 0: not merged, a plain tick", ["LamportBound"], 0, BOUND + 1, "tick"),
        _lamport("remote exactly 2^44 ahead of 1000: merged", ["LamportBound"], 1000, 1000 + BOUND),
        _lamport("remote 2^44+1 ahead of 1000: not merged", ["LamportBound"], 1000, 1001 + BOUND),
        _lamport(
            "2^44+1 ahead is not merged; after that receive's tick the same remote is 2^44 ahead: merged",
            ["LamportBound"],
            1000,
            1001 + BOUND,
            1001 + BOUND,
        ),
        _lamport("remote 2^62 from 5: far over the bound, not merged", ["LamportBound"], 5, 2**62),
        _lamport(
            "remote 2^63-1 again and again from a fresh counter: no progress, never saturated",
            ["LamportBound", "LamportSaturation"],
            0,
            top,
            top,
            top,
        ),
        _lamport(
            "each header at most 2^44 ahead is merged: a forger advances 2^44+1 per header",
            ["LamportBound"],
            0,
            BOUND,
            2 * BOUND + 1,
            3 * BOUND + 2,
        ),
        _lamport(
            "remote 2^63-1 within the bound saturates",
            ["LamportBound", "LamportSaturation"],
            top - BOUND,
            top,
            "tick",
        ),
        _lamport(
            "remote 2^63-2 within the bound reaches 2^63-1 without saturating",
            ["LamportBound", "LamportSaturation"],
            top - BOUND,
            top - 1,
        ),
        _lamport("a smaller remote is always merged, however far behind", ["LamportBound"], top - 5, 0),
    ]
