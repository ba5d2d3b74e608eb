"""Timestamp, the value every clock source returns (spec/clocks.md; tt-ext-v3 §3.5)."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import msgspec
import pytest

from tempotrace_sdk.clocks import CpuClock, Timestamp
from tempotrace_sdk.wire.layout import PTP_NS_MAX, ClockQuality, TsSource

OK, UNKNOWN, CPU, GTE = ClockQuality.OK, ClockQuality.UNKNOWN, TsSource.CPU, TsSource.GTE


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ((-1, GTE, OK, 5), "ptp_ns out of range"),
        ((PTP_NS_MAX + 1, GTE, OK, 5), "ptp_ns out of range"),
        ((1, GTE, OK, -1), "uncertainty_ns out of range"),
        ((1, GTE, OK, 65536), "uncertainty_ns out of range"),
    ],
    ids=["negative_ptp", "ptp_over_2^63-1", "negative_bound", "bound_over_uint16"],
)
def test_constructor_refuses_out_of_range_fields(args: tuple[int, TsSource, ClockQuality, int], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        Timestamp(*args)


def test_unknown_quality_forces_the_saturated_bound() -> None:
    """§3.5: UNKNOWN is always written with uncertainty 0xFFFF, whatever the source claimed."""
    assert Timestamp(1, CPU, UNKNOWN, 3).uncertainty_ns == 65535
    assert Timestamp(ptp_ns=1, ts_source=CPU, clk_quality=UNKNOWN, uncertainty_ns=0).uncertainty_ns == 65535
    assert Timestamp(1, CPU, OK, 3).uncertainty_ns == 3


def test_fields_edges_and_keywords() -> None:
    ts = Timestamp(ptp_ns=PTP_NS_MAX, ts_source=GTE, clk_quality=OK, uncertainty_ns=0)
    assert (ts.ptp_ns, ts.ts_source, ts.clk_quality, ts.uncertainty_ns) == (PTP_NS_MAX, GTE, OK, 0)
    assert ts.ts_source is GTE and ts.clk_quality is OK


def test_immutable() -> None:
    ts = Timestamp(1, GTE, OK, 5)
    for name in ("ptp_ns", "ts_source", "clk_quality", "uncertainty_ns", "other"):
        with pytest.raises(AttributeError):
            setattr(ts, name, 2)
        with pytest.raises(AttributeError):
            delattr(ts, name)
    assert ts.ptp_ns == 1


def test_value_semantics() -> None:
    """Equal and hash-equal by fields; never equal to a bare tuple; unordered; repr names the fields."""
    a, b, c = Timestamp(1, GTE, OK, 5), Timestamp(1, GTE, OK, 5), Timestamp(2, GTE, OK, 5)
    assert a == b and not a != b and hash(a) == hash(b) and len({a, b, c}) == 2
    assert a != c and not a == c
    plain = (1, GTE, OK, 5)
    assert a != plain and plain != a and not a == plain and not plain == a
    assert a != 1 and a != "x"
    with pytest.raises(TypeError):
        a < c  # noqa: B015
    assert (
        repr(a)
        == "Timestamp(ptp_ns=1, ts_source=<TsSource.GTE: 0>, clk_quality=<ClockQuality.OK: 0>, uncertainty_ns=5)"
    )
    match a:
        case Timestamp(ptp_ns, source, quality, bound):
            assert (ptp_ns, source, quality, bound) == (1, GTE, OK, 5)


def test_pickle_and_copy_rebuild_an_equal_validated_value() -> None:
    ts = Timestamp(7, CPU, UNKNOWN, 65535)
    for clone in (pickle.loads(pickle.dumps(ts)), copy.copy(ts), copy.deepcopy(ts)):
        assert clone == ts and type(clone) is Timestamp


def test_replace_revalidates_and_a_source_builds_plain_timestamps() -> None:
    ts = Timestamp(5, CPU, OK, 7)
    assert msgspec.structs.replace(ts, uncertainty_ns=9) == Timestamp(5, CPU, OK, 9)
    assert msgspec.structs.replace(ts, clk_quality=UNKNOWN).uncertainty_ns == 65535
    with pytest.raises(ValueError, match="ptp_ns out of range"):
        msgspec.structs.replace(ts, ptp_ns=-1)
    now = CpuClock(background=False).now()
    assert type(now) is Timestamp
    assert now == Timestamp(now.ptp_ns, now.ts_source, now.clk_quality, now.uncertainty_ns)


def test_asdict_of_a_dataclass_holding_a_timestamp() -> None:
    """dataclasses.asdict(PreflightResult) keeps working: the Timestamp is rebuilt, equal."""
    from tempotrace_sdk.clocks import preflight

    result = preflight(ClockQuality.UNKNOWN, clock=CpuClock(background=False))
    as_dict = dataclasses.asdict(result)
    assert as_dict["timestamp"] == result.timestamp
