"""The op record's start and end written natively (native/stamp ``tt_oprec_*``, torch/recorder.py): the same
words the Python path packs, for the same reading, tick and facts (spec/torch.md §1.4)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("torch")

from tempotrace_sdk.otel.context import get_state
from tempotrace_sdk.otel.stamp import NativeStamp
from tempotrace_sdk.torch.groups import group_info
from tempotrace_sdk.torch.recorder import Recorder, recorder
from tempotrace_sdk.wire.layout import LTS_MAX


@pytest.fixture
def native() -> Iterator[NativeStamp]:
    state = get_state()
    if not isinstance(state.stamp, NativeStamp):
        pytest.skip("the native stamp is not loaded here")
    clock = state._clock if state._clock is not None else state.clock
    if getattr(clock, "raw_mapping", None) is None:
        pytest.skip("this process's clock has no native mapping")
    yield state.stamp


def _ring(size: int) -> Recorder:
    """A recorder of its own that knows the process's groups (a group's index is the process recorder's)."""
    recorder.group_index(group_info(None))
    rec = Recorder(size)
    rec.groups = recorder.groups
    return rec


def _readings(rec: Recorder, number: int) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    record = rec.unpack(number & rec.mask)
    return record.start, record.end


def test_a_natively_written_record_reads_back_as_the_python_path_writes_it(group: None, native: NativeStamp,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    state = get_state()
    clock = state._clock if state._clock is not None else state.clock
    info = group_info(None)
    rec = _ring(8)
    before = clock.now().ptp_ns
    lts0 = state.lamport.value
    number = rec.begin(3, info, 41, 4096, 2)
    assert rec.end(number, 1)
    after = clock.now().ptp_ns
    record = rec.unpack(number & rec.mask)
    mapping = clock.raw_mapping
    unc, source, quality = mapping[5], mapping[6], mapping[4]
    assert (record.number, record.op, record.group, record.seq, record.nbytes, record.root) == (
        number, 3, info, 41, 4096, 2)
    (ptp, s_unc, s_source, s_quality, s_lts), end = record.start, record.end
    assert end is not None and record.completion == 1
    eptp, e_unc, e_source, e_quality, e_lts = end
    assert before <= ptp <= eptp <= after
    assert (s_unc, s_source, s_quality) == (e_unc, e_source, e_quality) == (unc, source, quality)
    assert s_lts == lts0 + 1 and e_lts == lts0 + 2 == state.lamport.value

    # the Python path, on a recorder of its own, packs the same words for the same facts
    py = _ring(8)
    monkeypatch.setattr(NativeStamp, "op_start", lambda *a, **k: False)  # as a refused native read
    monkeypatch.setattr(NativeStamp, "op_end", lambda *a, **k: False)
    n2 = py.begin(3, info, 41, 4096, 2)
    assert py.end(n2, 1)
    monkeypatch.undo()
    other = py.unpack(n2 & py.mask)
    assert (other.op, other.group, other.seq, other.nbytes, other.root, other.completion) == (
        3, info, 41, 4096, 2, 1)
    assert other.start[1:4] == record.start[1:4] and other.end is not None and other.end[1:4] == end[1:4]
    assert other.start[4] == e_lts + 1 and other.end[4] == e_lts + 2  # one counter, ticked by both paths


def test_a_saturated_counter_is_written_at_its_maximum_and_said_once(group: None, native: NativeStamp) -> None:
    state = get_state()
    cell = native._cell
    saved = int(cell[0])
    try:
        cell[0] = LTS_MAX
        rec = _ring(4)
        number = rec.begin(0, group_info(None), 0, -1, -1)
        assert rec.end(number)
        start, end = _readings(rec, number)
        assert start[4] == LTS_MAX and end is not None and end[4] == LTS_MAX
        assert state.lamport.saturated
    finally:
        cell[0] = saved
        native.lamport._saturated = False


def test_a_replaced_ring_is_let_go(group: None, native: NativeStamp) -> None:
    """A resize (another ring_ops) frees the old ring's memory: the native stamp keeps no view of it."""
    rec = _ring(8)
    rec.end(rec.begin(0, group_info(None), 0, -1, -1))
    assert native._buffer[0] is rec.buffer
    rec.resize(16)
    assert native._buffer == (None, None)
