"""select_clock, preflight and survey (spec/clocks.md §Selection, §Pre-flight, §Survey)."""

from __future__ import annotations

import errno
import json
import sys
import types
from typing import Any

import pytest

from tempotrace_sdk.clocks import (
    ClockSource,
    ClockSpecError,
    CpuClock,
    Timestamp,
    _native,
    preflight,
    select_clock,
    survey,
)
from tempotrace_sdk.clocks.kernel import read_kernel_sync
from tempotrace_sdk.errors import ClockError
from tempotrace_sdk.wire.layout import ClockQuality, TsSource


class FixedClock:
    def __init__(self, quality: ClockQuality, unc: int, name: str = "fixed") -> None:
        self.name = name
        self._ts = Timestamp(1_000, TsSource.GTE, quality, unc)

    def now(self) -> Timestamp:
        return self._ts

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "reason": "because the test says so"}


@pytest.mark.parametrize("spec", ["cpu", "CPU", "auto"])
def test_cpu_and_auto_without_phc(spec: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEMPOTRACE_PHC", raising=False)
    clock = select_clock(spec)
    assert isinstance(clock, ClockSource)
    if spec == "auto" and not list(__import__("glob").glob("/dev/ptp[0-9]*")):
        assert isinstance(clock, CpuClock)


def test_env_var_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEMPOTRACE_CLOCK", "bogus-from-env")
    with pytest.raises(ClockSpecError, match="bogus-from-env"):
        select_clock()
    monkeypatch.setenv("TEMPOTRACE_CLOCK", "cpu")
    assert select_clock().name == "cpu"


@pytest.mark.parametrize("spec", ["bogus", "cpu:extra", "phc:", "auto:x", ""])
def test_unknown_spec_names_itself_and_the_valid_forms(spec: str) -> None:
    with pytest.raises(ClockSpecError) as info:
        select_clock(spec)
    err = info.value
    assert isinstance(err, ValueError)
    assert repr(spec) in str(err)
    assert "phc:/dev/ptpN" in str(err) and "sim:<spec>" in str(err)


def test_sim_delegates_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    fake = types.ModuleType("tempotrace_sdk.clocks.simulated")

    def from_spec(spec: str) -> ClockSource:
        calls.append(spec)
        return FixedClock(ClockQuality.OK, 10, name=f"sim:{spec}")

    fake.from_spec = from_spec  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tempotrace_sdk.clocks.simulated", fake)
    clock = select_clock("sim:ntp-1:skew=5")
    assert calls == ["ntp-1:skew=5"] and clock.name == "sim:ntp-1:skew=5"


@pytest.mark.skipif(_native.native() is None, reason="native module not built")
@pytest.mark.parametrize(("spec", "code"), [("phc:/dev/null", errno.ENOTTY), ("phc:tt-nope0", errno.ENODEV)])
def test_phc_spec_errors(spec: str, code: int) -> None:
    with pytest.raises(ClockError) as info:
        select_clock(spec)
    assert info.value.errno == code


@pytest.mark.parametrize(
    ("quality", "unc", "require", "cap", "ok", "words"),
    [
        (ClockQuality.OK, 100, ClockQuality.OK, None, True, "is OK"),
        (ClockQuality.OK, 100, ClockQuality.OK, 99, False, "uncertainty is 100 ns, required <= 99 ns"),
        (ClockQuality.OK, 100, ClockQuality.OK, 100, True, "is OK"),
        (ClockQuality.DEGRADED, 100, ClockQuality.OK, None, False, "quality is DEGRADED, required OK"),
        (ClockQuality.DEGRADED, 100, ClockQuality.DEGRADED, None, True, "DEGRADED"),
        (ClockQuality.OK, 65535, ClockQuality.OK, 65534, False, "saturated"),
        (ClockQuality.UNKNOWN, 0, ClockQuality.DEGRADED, None, False, "quality is UNKNOWN"),
        (ClockQuality.UNKNOWN, 0, ClockQuality.UNKNOWN, None, True, "UNKNOWN"),
    ],
)
def test_preflight_rules(quality: ClockQuality, unc: int, require: ClockQuality, cap: int | None, ok: bool,
                         words: str) -> None:  # fmt: skip
    result = preflight(require, cap, clock=FixedClock(quality, unc))
    assert result.ok is ok
    assert words in result.reason
    assert "because the test says so" in result.reason
    assert result.source == "fixed"
    json.dumps(result.as_dict())


@pytest.mark.parametrize("cap", [-1, 65535, 70000])
def test_preflight_rejects_bad_cap(cap: int) -> None:
    with pytest.raises(ValueError, match="max_uncertainty_ns"):
        preflight(ClockQuality.OK, cap, clock=FixedClock(ClockQuality.OK, 1))


def test_preflight_on_this_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unsynchronised host: requiring OK fails and the reason names STA_UNSYNC."""
    monkeypatch.setenv("TEMPOTRACE_CLOCK", "cpu")
    result = preflight(ClockQuality.OK)
    if read_kernel_sync().unsync:
        assert not result.ok and "STA_UNSYNC" in result.reason
    assert result.timestamp.ts_source is TsSource.CPU


def test_preflight_with_unusable_spec_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEMPOTRACE_CLOCK", "nonsense")
    result = preflight(ClockQuality.UNKNOWN)
    assert not result.ok and "no clock source" in result.reason and result.source == "none"


def test_survey_is_json_and_explains_every_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("TEMPOTRACE_PTP4L_UDS", str(tmp_path / "no-ptp4l"))
    report = json.loads(json.dumps(survey()))
    assert set(report) >= {"native", "cpu", "phc", "ptp4l", "auto", "now"}
    assert report["cpu"]["kernel"]["sta_unsync"] == read_kernel_sync().unsync
    if read_kernel_sync().unsync:
        assert "STA_UNSYNC" in report["cpu"]["reason"]
    if not report["phc"]["devices"]:
        assert "no /dev/ptp*" in report["phc"]["why_none"]
    assert report["ptp4l"]["reachable"] is False and "no ptp4l socket" in report["ptp4l"]["why"]
    assert report["now"]["source"] == report["auto"]["source"]
    assert int(report["now"]["ptp_ns"]) > 0


def test_preflight_unreadable_clock_fails_closed() -> None:
    class Broken(FixedClock):
        def now(self) -> Timestamp:
            raise ClockError(errno.EIO, "device gone")

    result = preflight(ClockQuality.UNKNOWN, clock=Broken(ClockQuality.OK, 1))
    assert not result.ok and "could not be read" in result.reason and "device gone" in result.reason


def test_sim_spec_with_the_real_simulated_module() -> None:
    """The demo engineer's simulated sources plug in through the same protocol."""
    simulated = pytest.importorskip("tempotrace_sdk.clocks.simulated")
    profile = sorted(getattr(simulated, "PROFILES", {"ptp": None}))[0]
    clock = select_clock(f"sim:{profile}")
    assert isinstance(clock, ClockSource)
    assert isinstance(clock.now(), Timestamp)
    json.dumps(clock.describe(), default=str)


@pytest.mark.skipif(_native.native() is None, reason="native module not built")
def test_auto_explains_why_a_configured_phc_was_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from tempotrace_sdk.clocks.select import auto_choice

    monkeypatch.setenv("TEMPOTRACE_PHC", "/dev/null")
    clock, why = auto_choice()
    assert isinstance(clock, CpuClock)
    assert why.startswith("CPU") and "/dev/null" in why and "not a PTP clock" in why
