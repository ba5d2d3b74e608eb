"""One home for OpenTelemetry SDK internals (otel/sdk_internals.py, issue 12).

Every private SDK name the package uses appears in that module only; it finds
them on a real span at import; the processor takes the fast path where they
exist and falls back to the public API where they do not, with the same
spans as the outcome. `make otel-sdk-matrix` (mk/otel.mk) runs these against
the oldest supported SDK and the newest release with
TEMPOTRACE_EXPECT_SDK_FAST_PATH=1.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from _otel_helpers import Pipeline
from opentelemetry.sdk.trace import Span

from tempotrace_sdk import semconv as S
from tempotrace_sdk.otel import sdk_internals
from tempotrace_sdk.otel.context import TempoTraceState

PACKAGE = Path(sdk_internals.__file__).resolve().parents[1]
#: The SDK's private names: span/attribute storage, the freeze flag, the span lock, the hooks.
PRIVATE = re.compile(
    r"\._attributes\b|\._dict\b|max_value_len|\._immutable\b|_on_ending|\._end_time\b|span\._lock\b"
    r"|_active_span_processor|\._span_processor\b|_readable_span"
)


def test_sdk_private_names_live_in_one_module() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "sdk_internals.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if PRIVATE.search(code):
                offenders.append(f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}")
    assert offenders == []


def test_the_probe_finds_every_internal_where_expected() -> None:
    """Under the SDK matrix, every internal must be there: the fast path is taken on that SDK."""
    if os.environ.get("TEMPOTRACE_EXPECT_SDK_FAST_PATH") != "1":
        pytest.skip("set by `make otel-sdk-matrix` for the SDKs it installs")
    assert sdk_internals.PROBE == dict.fromkeys(("attribute_store", "span_lock", "immutable_flag", "on_ending"), True)


def test_the_fast_path_writes_without_the_public_setter(pipe: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the probe found the store, no stamp goes through set_attributes (its per-value cleaning)."""
    if not sdk_internals.PROBE["attribute_store"]:
        pytest.skip("this SDK has no direct attribute store")
    calls: list[int] = []
    original = Span.set_attributes
    monkeypatch.setattr(Span, "set_attributes", lambda self, attrs: calls.append(1) or original(self, attrs))
    with pipe.tracer.start_as_current_span("fast"):
        pipe.propagator.inject({})
    (span,) = pipe.spans().values()
    assert calls == [] and S.END_LTS in span.attributes and S.SEND_LTS in span.attributes


def test_without_the_store_the_public_path_gives_the_same_span(
    state: TempoTraceState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An SDK lacking the direct store still gets every start, end and send attribute (set_attributes,
    and after end() the validating setter under a lifted freeze)."""
    monkeypatch.setattr(sdk_internals, "_STORE", False)
    pipe = Pipeline(state)
    with pipe.tracer.start_as_current_span("public"):
        pipe.propagator.inject({})
    (span,) = pipe.spans().values()
    assert {S.LTS, S.END_LTS, S.END_PTP_NS, S.SEND_LTS, S.CLK_QUALITY, S.HOST} <= set(span.attributes)
    assert span.attributes[S.END_LTS] > span.attributes[S.LTS] and state.errors() == {}


def test_an_sdk_with_no_way_to_write_after_end_counts_the_lost_end_stamp(
    state: TempoTraceState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing silent: the start stamp is written at on_start, the impossible end stamp is counted."""
    from tempotrace_sdk.otel import processor

    monkeypatch.setattr(sdk_internals, "_STORE", False)
    monkeypatch.setattr(sdk_internals, "_IMMUTABLE", False)
    monkeypatch.setattr(processor, "_LATE_WRITE", False)  # what the probe would say of such an SDK
    pipe = Pipeline(state)
    with pipe.tracer.start_as_current_span("frozen"):
        pass
    (span,) = pipe.spans().values()
    assert S.LTS in span.attributes and S.END_LTS not in span.attributes
    assert state.errors() == {"end_stamp_lost": 1}
