"""The span table's two stamps decoders read every text alike (parquet_stamps.py): the C reference decoder the
writer uses where the native module is built, and stamptext.decode, which it falls back on. A difference
would put other values in a Parquet file than the analysis reads from the same span's JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tempotrace_sdk.analysis import parquet_layout as L
from tempotrace_sdk.analysis.parquet_stamps import StampsColumns
from tempotrace_sdk.clocks._native import native

pytestmark = pytest.mark.skipif(native() is None, reason="the native module is not built (make venv builds it)")

VECTORS = Path(__file__).resolve().parents[2] / "conformance" / "vectors" / "tt_stamps_text_test.json"
INT64_MAX = 2**63 - 1
QUALITY = {"OK": 0, "DEGRADED": 1, "UNKNOWN": 2}
T0 = 1_700_000_000_000_000_000


def _cases() -> list[tuple[int, str, int, int, int | None, int | None]]:
    cases = []
    for group in json.loads(VECTORS.read_text())["testGroups"]:
        if group["type"] != "StampsDecode":
            continue
        for t in group["tests"]:
            start, end = int(t["startTimeUnixNano"]), int(t["endTimeUnixNano"])
            if not (start <= INT64_MAX and end <= INT64_MAX):  # a span table's times are int64 (spec/parquet.md §2.1)
                continue
            unc = t.get("uncertaintyNs")
            qual = t.get("clkQuality")
            text = t["text"] if "text" in t else "".join(p["text"] * p["repeat"] for p in t["textParts"])
            cases.append((t["tcId"], text, start, end, None if unc is None else int(unc),
                          None if qual is None else QUALITY.get(qual, -1)))
    return cases


CASES = _cases()


def _both(text: str, start: int, end: int, unc: int | None, qual: int | None) -> tuple[Any, Any]:
    return (StampsColumns().row(text, start, end, unc, qual),
            StampsColumns(use_native=False).row(text, start, end, unc, qual))


def test_the_native_decoder_is_the_one_in_use() -> None:
    assert StampsColumns().native


def test_every_stamps_vector_reads_alike() -> None:
    differ = [case[0] for case in CASES if (lambda both: both[0] != both[1])(_both(*case[1:]))]
    assert differ == []


def test_the_vectors_include_valid_and_refused_texts() -> None:
    results = [_both(*case[1:])[1] is None for case in CASES if len(case[1]) < 10_000]
    assert len(results) > 150 and 40 < sum(results) < len(results) - 40


@pytest.mark.parametrize("unc, qual", [(-1, 0), (65536, 0), (2**40, 0), (220, -1), (220, 3), (None, None), (0, 2)])
def test_plain_attributes_out_of_their_range_are_refused_alike(unc: int | None, qual: int | None) -> None:
    c, python = _both("s7,0,100 e2,50", T0, T0 + 200, unc, qual)
    assert c == python
    out_of_range = (unc is not None and not 0 <= unc <= 65535) or (qual is not None and qual not in (0, 1, 2))
    assert (c is None) == out_of_range


def test_a_text_of_many_sends_is_read_whole() -> None:
    text = "s5,0 e300 " + " ".join(f"x{i + 1},{10 * i}" for i in range(200))
    c, python = _both(text, T0, T0 + 10_000, 220, 0)
    assert c == python and c is not None and len(c[L.STAMPS_SENDS]) == 200
    # the second call reuses the room the first one grew
    assert StampsColumns().row(text, T0, T0 + 10_000, 220, 0) == c


_VALID = [case for case in CASES if len(case[1]) < 10_000 and _both(*case[1:])[1] is not None]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_VALID), st.integers(0, 200), st.text(alphabet="sekrx0123456789,- _=AZaz", max_size=4),
       st.integers(0, 3))
def test_mutated_texts_read_alike(case: tuple[Any, ...], at: int, insert: str, cut: int) -> None:
    text = case[1]
    at %= len(text) + 1
    mutated = text[:at] + insert + text[at + cut:]
    c, python = _both(mutated, *case[2:])
    assert c == python, mutated


def test_the_analysis_reads_every_vector_alike_either_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """The analysis's span reader (values._from_stamps) decodes in C where it can; on every vector it gives the
    readings, Lamport values, sends and sketch the Python decoder gives, and refuses the same texts."""
    from tempotrace_sdk.analysis import values
    from tempotrace_sdk.analysis.stampsread import NativeStamps
    from tempotrace_sdk.analysis.values import AttributeRuleError

    names = {v: k for k, v in QUALITY.items()}

    def read(case: tuple[Any, ...]) -> Any:
        _, text, start, end, unc, qual = case
        if qual == -1:  # not a quality name: the rules refuse it before the text is read
            return "not read"
        try:
            return values._from_stamps(text, "00f067aa0ba902b7", "53995c3f42cd8ad8", start, end, unc,
                                       None if qual is None else names[qual], False)
        except AttributeRuleError as err:
            return err.rule.split(" (token")[0]

    cases = [case for case in CASES if len(case[1]) < 10_000]
    native_reads = [read(case) for case in cases]
    python = NativeStamps()
    python.native = False
    monkeypatch.setattr(values, "thread_reader", lambda: python)
    assert [read(case) for case in cases] == native_reads
    assert sum(isinstance(r, tuple) for r in native_reads) > 40  # valid texts among them, and refused ones
