"""Fixtures for the OpenTelemetry layer's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _otel_helpers import Pipeline, StepClock

from tempotrace_sdk.otel import TempoTraceState


@pytest.fixture
def clock() -> StepClock:
    return StepClock()


@pytest.fixture
def state(clock: StepClock) -> TempoTraceState:
    return TempoTraceState(clock=clock, tenant=5, host="node-a")


@pytest.fixture
def pipe(state: TempoTraceState) -> Iterator[Pipeline]:
    p = Pipeline(state)
    yield p
    p.provider.shutdown()
