"""Carried records and the Lamport bound (tt-ext §10.1, spec/torch.md §3): a record whose
counter is more than LAMPORT_MAX_AHEAD ahead of the receiver's is not merged. The receiver
records no ``torch.recv.lts`` for it (so the analysis never uses that Lamport evidence), counts
``LAMPORT_AHEAD``, and its counter is not dragged up; the honest records still merge."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("torch")

import torch

from tempotrace_sdk import semconv as S
from tempotrace_sdk.otel import context as otel_context
from tempotrace_sdk.otel.context import TempoTraceState
from tempotrace_sdk.torch.carriage import records as carriage
from tempotrace_sdk.torch.counts import carriage_counts
from tempotrace_sdk.torch.groups import GroupInfo
from tempotrace_sdk.wire import LAMPORT_MAX_AHEAD, ClockQuality, Sketch, TsSource, TTExt
from tempotrace_sdk.wire.torchrecord import RecordKind, absent_record, pack_record

LTS_MAX = 2**63 - 1


@pytest.fixture(params=["native", "pure"])
def state(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[TempoTraceState]:
    from tempotrace_sdk.clocks._native import native

    if request.param == "native" and native() is None:
        pytest.skip("native stamp unavailable")
    st = TempoTraceState(tenant=0, host="rank-0", native_stamp=request.param == "native")
    monkeypatch.setattr(otel_context, "_GLOBAL", st)
    yield st


def _record(kind: RecordKind, rank: int, seq: int, lts: int, span_id: int) -> bytes:
    header = TTExt(
        ptp_ns=1_764_000_037_000_000_000,
        ts_source=TsSource.CPU,
        clk_quality=ClockQuality.OK,
        uncertainty_ns=1000,
        lts=lts,
        svc_sketch=Sketch.of(span_id),
    ).encode()
    return pack_record(int(kind), rank, seq, 0x0AF7651916CD43DD8448EB211C80319C, span_id, header)


def _group(ranks: tuple[int, ...]) -> GroupInfo:
    return GroupInfo(
        key="0-3", ranks=ranks, group_rank=0, rank=0, backend="gloo", device=torch.device("cpu"),
        tags=True, attributes={}, pg_ref=lambda: None,
    )


def _counts_delta(before: dict[str, int]) -> dict[str, Any]:
    after = carriage_counts()
    changed = {k for k in set(after) | set(before) if after.get(k, 0) != before.get(k, 0)}
    return {k: after.get(k, 0) - before.get(k, 0) for k in changed}


def test_side_message_far_ahead_is_described_but_not_merged(state: TempoTraceState) -> None:
    start = state.lamport.tick()
    before = carriage_counts()
    attrs = carriage.merge_side(_record(RecordKind.P2P, 1, 0, LTS_MAX, 0x11), src=1, seq=0)
    assert S.TORCH_RECV_LTS not in attrs and attrs[S.TORCH_RECV_COUNT] == 0
    assert attrs[S.TORCH_REMOTE_LTS] == LTS_MAX  # what the peer claimed stays on record
    assert _counts_delta(before) == {"LAMPORT_AHEAD": 1}
    assert state.lamport.tick() < start + 10  # not dragged to saturation


def test_side_message_at_the_bound_merges(state: TempoTraceState) -> None:
    local = state.lamport.tick()
    attrs = carriage.merge_side(_record(RecordKind.P2P, 1, 0, local + LAMPORT_MAX_AHEAD, 0x11), src=1, seq=0)
    assert attrs[S.TORCH_RECV_LTS] == local + LAMPORT_MAX_AHEAD + 1 and attrs[S.TORCH_RECV_COUNT] == 1


def test_exchange_merges_the_honest_records_and_leaves_out_the_one_too_far_ahead(state: TempoTraceState) -> None:
    local = state.lamport.tick()
    records = [absent_record()]  # this rank's own slot is skipped
    records.append(_record(RecordKind.EXCHANGE, 1, 7, local + 5, 0x21))
    records.append(_record(RecordKind.EXCHANGE, 2, 7, LTS_MAX, 0x22))  # forged
    records.append(_record(RecordKind.EXCHANGE, 3, 7, local + 9, 0x23))
    before = carriage_counts()
    attrs = carriage.merge_exchange(b"".join(records), _group((0, 1, 2, 3)), seq=7)
    assert attrs[S.TORCH_RECV_COUNT] == 2 and attrs[S.TORCH_RECV_MISSING] == (2,)
    assert attrs[S.TORCH_RECV_LTS] > local + 9 and attrs[S.TORCH_RECV_LTS] < local + 20
    merged_sketch = Sketch.from_bytes(bytes.fromhex(attrs[S.TORCH_RECV_SKETCH]))
    assert 0x21 in merged_sketch and 0x23 in merged_sketch and 0x22 not in merged_sketch
    delta = _counts_delta(before)
    assert delta["LAMPORT_AHEAD"] == 1 and delta["merged"] == 2 and delta["missing"] == 1


def test_exchange_with_every_record_too_far_ahead_writes_no_recv_lts(state: TempoTraceState) -> None:
    state.lamport.tick()
    records = [absent_record(), _record(RecordKind.EXCHANGE, 1, 0, LTS_MAX, 0x31)]
    attrs = carriage.merge_exchange(b"".join(records), _group((0, 1)), seq=0)
    assert S.TORCH_RECV_LTS not in attrs and attrs[S.TORCH_RECV_COUNT] == 0 and attrs[S.TORCH_RECV_MISSING] == (1,)
