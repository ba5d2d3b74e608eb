"""The native PHC module: golden replays of sample selection, real error paths, ABI checks.

spec/clocks.md §Native module. Skipped as a whole when the module is not
built (the pure-Python fallback is tested in test_clock_cpu.py).
"""

from __future__ import annotations

import errno
import json
import os
import pathlib
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tempotrace_sdk.clocks import _native
from tempotrace_sdk.clocks.kernel import read_clock_ns, read_kernel_sync
from tempotrace_sdk.errors import ClockError, TempoTraceError

if _native.native() is None:
    pytest.skip(f"native module unavailable: {_native.native_status().reason}", allow_module_level=True)

from tempotrace_sdk.clocks.phc import PhcClock, PhcDevice, select_samples

GOLDEN = json.loads((pathlib.Path(__file__).parent / "golden" / "sysoff_select.json").read_text())


def _samples(spec: object) -> list[tuple[int, int, int]]:
    if isinstance(spec, str) and spec.startswith("repeat:"):
        _, count, row = spec.split(":", 2)
        return [tuple(int(v) for v in json.loads(row))] * int(count)  # type: ignore[list-item]
    if isinstance(spec, str) and spec.startswith("ramp:"):
        # Sample i: before = i ms, phc = before + 50, width shrinking from 50 to 2 ns.
        n = int(spec.split(":")[1])
        rows = []
        for i in range(n):
            width = 50 - 2 * i
            rows.append((i * 1_000_000, i * 1_000_000 + 50, i * 1_000_000 + width))
        return rows
    assert isinstance(spec, list)
    return [tuple(int(v) for v in row) for row in spec]  # type: ignore[misc]


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=lambda c: f"tc{c['id']}")
def test_golden_sample_selection(case: dict) -> None:
    """Recorded sample arrays go through tt_sysoff_select, the code every real read ends in."""
    samples = _samples(case["samples"])
    if "error" in case:
        with pytest.raises(ClockError) as info:
            select_samples(samples, case["method"])
        assert info.value.errno == getattr(errno, case["error"]), case["comment"]
        return
    got = select_samples(samples, case["method"])
    want = case["expect"]
    assert (got.phc_ns, got.sys_ns, got.width_ns) == (
        int(want["phc_ns"]),
        int(want["sys_ns"]),
        int(want["width_ns"]),
    ), case["comment"]
    assert got.method == case["method"]
    assert got.samples == len(samples)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize(
    ("target", "code", "words"),
    [
        ("/dev/ptp_does_not_exist", errno.ENOENT, "No such file"),
        ("/dev/null", errno.ENOTTY, "not a PTP clock"),
        ("tt-no-such-if0", errno.ENODEV, "no network interface"),
        ("lo", errno.EOPNOTSUPP, "has no PTP hardware clock"),
        ("an-interface-name-far-too-long", errno.ENAMETOOLONG, "ETHTOOL_GET_TS_INFO"),
    ],
)
def test_open_errors_are_typed_and_leak_no_fd(target: str, code: int, words: str) -> None:
    """Each failure is a ClockError (an OSError and a TempoTraceError) with errno and target; no fd left open."""
    before = _open_fds()
    with pytest.raises(ClockError) as info:
        PhcDevice(target)
    err = info.value
    assert isinstance(err, OSError) and isinstance(err, TempoTraceError)
    assert err.errno == code
    assert words in str(err)
    assert err.filename is not None
    assert _open_fds() == before


def test_phc_clock_spec_error_reaches_caller() -> None:
    with pytest.raises(ClockError) as info:
        PhcClock("/dev/null", background=False)
    assert info.value.errno == errno.ENOTTY


@pytest.mark.parametrize("samples", [0, 26, -1])
def test_sample_count_is_bounded(samples: int) -> None:
    with pytest.raises(ValueError, match=r"samples: must be 1\.\.25"):
        PhcDevice("/dev/null", samples=samples)


def test_abi_version_and_capabilities_exported() -> None:
    status = _native.native_status()
    assert status.available and status.version == _native.ABI_VERSION
    # Built against this machine's uapi headers, which know all of these.
    assert status.capabilities == {
        "has_sys_offset_precise": True,
        "has_sys_offset_extended": True,
        "has_sys_offset": True,
        "has_ethtool_ts_info": True,
        "has_clock_tai": True,
    }


def test_mismatched_build_says_how_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_native, "ABI_VERSION", _native.ABI_VERSION + 1)
    _native.reset_cache()
    try:
        status = _native.native_status()
        assert not status.available
        assert "stale build" in status.reason and "pip install -e ." in status.reason
        with pytest.raises(ClockError, match=r"pip install -e \."):
            PhcDevice("/dev/ptp0")
    finally:
        monkeypatch.undo()
        _native.reset_cache()


def test_pure_env_forces_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    native_state = read_kernel_sync()
    monkeypatch.setenv(_native.PURE_ENV, "1")
    _native.reset_cache()
    try:
        assert _native.native() is None
        assert _native.PURE_ENV in _native.native_status().reason
        pure_state = read_kernel_sync()
        assert pure_state.via == "ctypes ntp_adjtime" and native_state.via == "native ntp_adjtime"
        assert (pure_state.status, pure_state.tai_s) == (native_state.status, native_state.tai_s)
    finally:
        monkeypatch.undo()
        _native.reset_cache()


@pytest.mark.parametrize("name", ["CLOCK_TAI", "CLOCK_REALTIME", "CLOCK_MONOTONIC_RAW"])
def test_read_any_clock_id(name: str) -> None:
    clock_id = getattr(time, name)
    before = time.clock_gettime_ns(clock_id)
    got = read_clock_ns(clock_id)
    after = time.clock_gettime_ns(clock_id)
    assert before <= got <= after


def test_read_bad_clock_id() -> None:
    with pytest.raises(ClockError) as info:
        read_clock_ns(12345)
    assert info.value.errno == errno.EINVAL


@pytest.mark.hardware
@pytest.mark.skipif(not any(pathlib.Path("/dev").glob("ptp[0-9]*")), reason="no /dev/ptp* on this host")
def test_real_phc_read() -> None:
    """On a host with a PHC: a read returns a method, a sane width, and PHC near CLOCK_TAI."""
    path = str(sorted(pathlib.Path("/dev").glob("ptp[0-9]*"))[0])
    device = PhcDevice(path)
    try:
        first = device.read()
        second = device.read()
        assert first.method == second.method and first.method is not None
        assert 0 <= first.width_ns < 1_000_000
        assert second.phc_ns > first.phc_ns
    finally:
        device.close()


_i64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_i64, _i64, _i64), min_size=1, max_size=25))
def test_selection_matches_a_plain_oracle(samples: list[tuple[int, int, int]]) -> None:
    """Any array: the C choice is the earliest valid sample of minimal width, or EAGAIN if none is valid."""
    valid = [(after - before, i) for i, (before, _, after) in enumerate(samples) if 0 <= after - before < 2**63]
    if not valid:
        with pytest.raises(ClockError) as info:
            select_samples(samples)
        assert info.value.errno == errno.EAGAIN
        return
    width, index = min(valid)
    got = select_samples(samples)
    before, phc, _ = samples[index]
    assert (got.phc_ns, got.width_ns, got.sys_ns) == (phc, width, before + width // 2)
