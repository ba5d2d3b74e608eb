"""Fixtures for the OpenTelemetry layer's tests.

Every test that takes ``state`` (and so ``pipe``) runs twice: with the native
stamp (otel/stamp.py's NativeStamp over a NativeLamport) and with the
pure-Python one, which TEMPOTRACE_PUREPYTHON=1 or a machine without a
compiler gets. The native run skips, saying why, where the module is not built.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _otel_helpers import Pipeline, StepClock

from tempotrace_sdk.clocks._native import native, native_status
from tempotrace_sdk.otel import TempoTraceState


@pytest.fixture
def clock() -> StepClock:
    return StepClock()


@pytest.fixture(params=["native", "pure"])
def stamp_kind(request: pytest.FixtureRequest) -> str:
    if request.param == "native" and native() is None:
        pytest.skip(f"native stamp unavailable: {native_status().reason}")
    return str(request.param)


@pytest.fixture
def state(clock: StepClock, stamp_kind: str) -> TempoTraceState:
    return TempoTraceState(clock=clock, tenant=5, host="node-a", native_stamp=stamp_kind == "native")


@pytest.fixture
def pipe(state: TempoTraceState) -> Iterator[Pipeline]:
    p = Pipeline(state)
    yield p
    p.provider.shutdown()
