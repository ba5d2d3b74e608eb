"""Application Confidence Policy files and verdicts (spec/policy.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _otel_helpers import Pipeline, StepClock

from tempotrace_sdk.clocks.base import Timestamp
from tempotrace_sdk.errors import PolicyError
from tempotrace_sdk.otel import Policy, TempoTracePropagator, TempoTraceState, load_policy
from tempotrace_sdk.wire import ClockQuality, Sketch, TsSource, TTExt

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies"


def ts(source: TsSource = TsSource.GTE, quality: ClockQuality = ClockQuality.OK, u: int = 100) -> Timestamp:
    return Timestamp(1_800_000_000_000_000_000, source, quality, u)


def test_the_three_paper_workloads_ship_and_load() -> None:
    cluster = load_policy(EXAMPLES / "cluster.toml")
    assert sorted(c.name for c in cluster.contracts.values()) == ["llm-inference", "long-training", "regulated-audit"]
    for name in ("llm-inference", "long-training", "regulated-audit"):
        single = load_policy(EXAMPLES / f"{name}.toml")
        (contract,) = single.contracts.values()
        assert cluster.contracts[contract.tenant_id] == contract


@pytest.mark.parametrize(
    ("tenant", "reading", "verdict", "reason"),
    [
        (1, ts(u=220), "pass", ""),
        (1, ts(u=221), "suspend_alerting", "uncertainty_ns 221 > 220"),
        (1, ts(quality=ClockQuality.DEGRADED, u=200), "suspend_alerting", "clk_quality DEGRADED not in OK"),
        (1, ts(source=TsSource.SW_GCC), "suspend_alerting", "ts_source SW_GCC not in GTE"),
        (2, ts(source=TsSource.SW_GCC, u=2100), "pass", ""),
        (2, ts(source=TsSource.CPU, u=5000), "degrade", "ts_source CPU not in GTE|SW_GCC; uncertainty_ns 5000 > 2100"),
        (3, ts(u=40_000), "pass", ""),
        (3, ts(source=TsSource.CPU, quality=ClockQuality.UNKNOWN), "flag", "ts_source CPU not in GTE"),
    ],
    ids=["llm-ok", "llm-221ns", "llm-degraded", "llm-sw-gcc", "train-sw-gcc", "train-cpu", "audit-wide", "audit-cpu"],
)
def test_verdicts_follow_the_paper(tenant: int, reading: Timestamp, verdict: str, reason: str) -> None:
    contract = load_policy(EXAMPLES / "cluster.toml").contract_for(tenant)
    assert contract is not None
    got_verdict, got_reason = contract.verdict(reading)
    assert got_verdict == verdict
    assert got_reason.startswith(reason) and (reason or not got_reason)


BAD = [
    ("unknown field", '[tenants.1]\nts_sources = ["GTE"]\nmax_uncertanty_ns = 5\n', 3, "tenants.1.max_uncertanty_ns"),
    ("bad source", '[tenants.1]\n\nts_sources = ["GTE", "PTP"]\n', 3, "tenants.1.ts_sources"),
    ("bad quality type", '[tenants.4]\nclk_qualities = "OK"\n', 2, "tenants.4.clk_qualities"),
    ("bound too large", "[tenants.1]\nmax_uncertainty_ns = 70000\n", 2, "tenants.1.max_uncertainty_ns"),
    ("bound negative", "[tenants.1]\nname = 'x'\nmax_uncertainty_ns = -1\n", 3, "tenants.1.max_uncertainty_ns"),
    ("bad action", '[tenants.1]\non_violation = "page"\n', 2, "tenants.1.on_violation"),
    ("tenant 16", "# c\n[tenants.16]\nname = 'x'\n", 2, "tenants.16"),
    ("tenant name", "[tenants.llm]\nname = 'x'\n", 1, "tenants.llm"),
    # "01" and "1" are both tenant 1: accepting both let the later table silently replace the earlier contract
    ("tenant leading zero", "[tenants.1]\nmax_uncertainty_ns = 220\n[tenants.01]\n", 3, "tenants.01"),
    ("tenant 00", "[tenants.00]\nname = 'x'\n", 1, "tenants.00"),
    ("retention zero", "[tenants.1]\nretention_days = 0\n", 2, "tenants.1.retention_days"),
    ("tier number", "[tenants.1]\ntier = 3\n", 2, "tenants.1.tier"),
    ("syntax", "[tenants.1]\nname = \n", 2, "<toml>"),
    ("top-level typo", "versoin = 1\n", 1, "versoin"),
    ("wrong version", "\nversion = 2\n", 2, "version"),
]


@pytest.mark.parametrize(("why", "text", "line", "field"), BAD, ids=[b[0] for b in BAD])
def test_bad_files_name_the_line_and_the_field(tmp_path: Path, why: str, text: str, line: int, field: str) -> None:
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    err = info.value
    assert err.line == line, str(err)  # type: ignore[attr-defined]
    assert err.field == field  # type: ignore[attr-defined]
    assert f"{path}:{line}: {field}:" in str(err)
    assert isinstance(err, ValueError)


def test_missing_file_is_a_policy_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read"):
        load_policy(tmp_path / "nope.toml")


def test_processor_records_the_local_tenants_verdict(clock: StepClock) -> None:
    policy = load_policy(EXAMPLES / "cluster.toml")
    clock.uncertainty = 500  # breaks llm-inference's 220 ns
    pipe = Pipeline(TempoTraceState(clock=clock, tenant=1, host="h", policy=policy))
    with pipe.tracer.start_as_current_span("infer"):
        pass
    attrs = pipe.spans()["infer"].attributes
    assert attrs["tempotrace.policy.verdict"] == "suspend_alerting"
    assert attrs["tempotrace.policy.reason"] == "uncertainty_ns 500 > 220"
    assert attrs["tempotrace.policy.tier"] == "tier-1"
    assert attrs["tempotrace.policy.retention_days"] == 14


def test_a_remote_tenant_never_chooses_the_contract(clock: StepClock) -> None:
    """A peer claiming tenant 2 (lenient) must not get our tenant-1 span judged leniently."""
    policy = load_policy(EXAMPLES / "cluster.toml")
    clock.source = TsSource.SW_GCC  # fine for tenant 2, a breach for tenant 1
    state = TempoTraceState(clock=clock, tenant=1, host="h", policy=policy)
    pipe = Pipeline(state)
    remote = TTExt(
        ptp_ns=1, ts_source=TsSource.GTE, clk_quality=0, uncertainty_ns=5, lts=9, svc_sketch=Sketch.EMPTY, tenant_id=2
    )
    ctx = TempoTracePropagator(state=state).extract({"tt-ext": remote.to_header()})
    with pipe.tracer.start_as_current_span("server", context=ctx):
        pass
    attrs = pipe.spans()["server"].attributes
    assert attrs["tempotrace.remote.tenant_id"] == 2
    assert attrs["tempotrace.tenant_id"] == 1
    assert attrs["tempotrace.policy.verdict"] == "suspend_alerting"


def test_an_end_that_breaks_the_contract_changes_a_passing_verdict(clock: StepClock) -> None:
    policy = Policy.loads("[tenants.0]\nmax_uncertainty_ns = 300\non_violation = 'degrade'\n")
    pipe = Pipeline(TempoTraceState(clock=clock, tenant=0, host="h", policy=policy))
    with pipe.tracer.start_as_current_span("step"):
        clock.quality = ClockQuality.UNKNOWN  # the grandmaster vanished mid-span
    attrs = pipe.spans()["step"].attributes
    assert attrs["tempotrace.policy.verdict"] == "degrade"
    assert attrs["tempotrace.policy.reason"] == "end: uncertainty_ns 65535 > 300"


def test_no_contract_for_the_local_tenant_means_no_verdict(clock: StepClock) -> None:
    policy = load_policy(EXAMPLES / "cluster.toml")
    pipe = Pipeline(TempoTraceState(clock=clock, tenant=9, host="h", policy=policy))
    with pipe.tracer.start_as_current_span("x"):
        pass
    assert "tempotrace.policy.verdict" not in pipe.spans()["x"].attributes
