"""The stamps-text conformance vectors through stamptext directly (semantic-conventions §1.4).

conformance/run drives the same vectors through the protocol adapter; here a
failure points at stamptext itself: each decode vector's absolute values, its
canonical text and, for a refused text, the rule's class
(``StampsError.error_class``); each encode vector's text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tempotrace_sdk import stamptext
from tempotrace_sdk.errors import StampsError

VECTORS = Path(__file__).resolve().parents[2] / "conformance" / "vectors" / "tt_stamps_text_test.json"
GROUPS = {g["type"]: g["tests"] for g in json.loads(VECTORS.read_text(encoding="utf-8"))["testGroups"]}
SOURCES = ("GTE", "SW_GCC", "CPU")
QUALITIES = ("OK", "DEGRADED", "UNKNOWN")


def _text(t: dict[str, Any]) -> str:
    return t["text"] if "text" in t else "".join(p["text"] * p["repeat"] for p in t["textParts"])


def _reading(r: stamptext.Reading) -> dict[str, Any]:
    return {"ptpNs": str(r.ptp_ns), "uncertaintyNs": r.uncertainty_ns, "clkQuality": QUALITIES[r.clk_quality],
            "lts": str(r.lts)}  # fmt: skip


def as_vector(st: stamptext.SpanStamps) -> dict[str, Any]:
    """SpanStamps in the vectors' form (conformance/README.md, StampsDecode)."""
    out: dict[str, Any] = {"tsSource": SOURCES[st.ts_source], "start": _reading(st.start)}
    if st.end is not None:
        out["end"] = _reading(st.end)
    if (r := st.remote) is not None:
        head = stamptext.Reading(r.ptp_ns, r.uncertainty_ns, r.clk_quality, r.lts)
        out["receive"] = {**_reading(head), "tsSource": SOURCES[r.ts_source], "tenantId": r.tenant_id}
        if r.recv_lts is not None:
            out["receive"]["recvLts"] = str(r.recv_lts)
    if st.sketch is not None:
        out["sketch"] = st.sketch.hex()
    out["sends"] = [_reading(x) for x in st.sends]
    return out


def encode(v: dict[str, Any], start_ns: int, end_ns: int) -> str:
    """stamptext.encode of a vector's ``stamps``."""

    def reading(r: dict[str, Any]) -> tuple[int, int, int, int]:
        return int(r["lts"]), int(r["ptpNs"]), r["uncertaintyNs"], QUALITIES.index(r["clkQuality"])

    lts, ptp, unc, qual = reading(v["start"])
    rec = v.get("receive")
    remote = None
    if rec is not None:
        _, r_ptp, r_unc, r_qual = reading(rec)
        remote = (r_ptp, r_unc, r_qual, SOURCES.index(rec["tsSource"]), rec["tenantId"], int(rec["lts"]))
    recv = int(rec["recvLts"]) if rec is not None and "recvLts" in rec else None
    end = reading(v["end"]) if "end" in v else None
    sketch = bytes.fromhex(v["sketch"]) if "sketch" in v else None
    sends = [reading(x) for x in v["sends"]]
    return stamptext.encode(lts, ptp, unc, qual, SOURCES.index(v["tsSource"]), start_ns, end, end_ns, remote, recv,
                            sketch, sends)  # fmt: skip


@pytest.mark.parametrize("t", GROUPS["StampsDecode"], ids=lambda t: f"{t['tcId']}-{t['comment'][:40]}")
def test_decode_vector(t: dict[str, Any]) -> None:
    start_ns, end_ns = int(t["startTimeUnixNano"]), int(t["endTimeUnixNano"])
    given = t.get("clkQuality")  # a name, or a number where the value has none (PlainRange)
    qual = None if given is None else given if isinstance(given, int) else QUALITIES.index(given)
    if t["result"] == "invalid":
        with pytest.raises(StampsError) as info:
            stamptext.decode(_text(t), start_ns, end_ns, t.get("uncertaintyNs"), qual)
        assert info.value.error_class == t["errorClass"]
        return
    st = stamptext.decode(_text(t), start_ns, end_ns, t.get("uncertaintyNs"), qual)
    assert as_vector(st) == t["stamps"]
    assert encode(t["stamps"], start_ns, end_ns) == t["canonical"]


@pytest.mark.parametrize("t", GROUPS["StampsEncode"], ids=lambda t: f"{t['tcId']}-{t['comment'][:40]}")
def test_encode_vector(t: dict[str, Any]) -> None:
    assert encode(t["stamps"], int(t["startTimeUnixNano"]), int(t["endTimeUnixNano"])) == t["text"]


def test_every_rule_has_a_vector() -> None:
    """Each class StampsError can carry refuses at least one vector (a new rule needs a vector)."""
    classes = {t["errorClass"] for t in GROUPS["StampsDecode"] if t["result"] == "invalid"}
    assert classes == {*stamptext._SYNTAX.values(), "STAMPS_TOKEN", "STAMPS_ORDER", "STAMPS_RANGE",
                       "STAMPS_TOO_MANY_SENDS"}  # fmt: skip
