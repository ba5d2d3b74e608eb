"""Round trips of the wire layer that every other layer relies on (spec §2, §5)."""

import pytest

from tempotrace_sdk import ClockQuality, HeaderError, LamportClock, Sketch, TsSource, TTExt


def test_header_round_trips_through_binary_and_text() -> None:
    header = TTExt(
        ptp_ns=1_700_000_037_000_000_123,
        ts_source=TsSource.GTE,
        clk_quality=ClockQuality.OK,
        uncertainty_ns=220,
        lts=42,
        svc_sketch=Sketch.of(0x0102030405060708),
        tenant_id=15,
    )
    raw = header.encode()
    assert len(raw) == 53
    assert raw[0] == 0xF3
    text = header.to_header()
    assert len(text) == 71
    assert TTExt.decode(raw) == header
    assert TTExt.from_header(f" \t{text} ") == header


def test_unknown_quality_saturates_uncertainty() -> None:
    header = TTExt(ptp_ns=1, ts_source=TsSource.CPU, clk_quality=ClockQuality.UNKNOWN, uncertainty_ns=5, lts=0)
    assert header.uncertainty_ns == 0xFFFF
    assert header.interval() is None


def test_non_canonical_text_is_refused() -> None:
    text = TTExt(ptp_ns=1, ts_source=0, clk_quality=0, uncertainty_ns=1, lts=1).to_header()  # type: ignore[arg-type]
    bumped = text[:-1] + ("C" if text[-1] == "B" else "B")  # low bits set
    with pytest.raises(HeaderError) as info:
        TTExt.from_header(bumped)
    assert info.value.field == "text"


def test_lamport_merge_takes_the_maximum_plus_one() -> None:
    clock = LamportClock()
    assert clock.tick() == 1
    assert clock.merge(10) == 11
    assert clock.merge(3) == 12
    with pytest.raises(HeaderError):
        clock.merge(2**63)
    assert clock.value == 12
