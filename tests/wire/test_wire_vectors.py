"""Every conformance vector against the Python codec (conformance/README.md).

One pytest case per tcId, so a failure names the vector. Valid vectors must
reproduce every listed output; invalid ones must raise HeaderError with the
vector's errorClass (spec §9) and nothing else.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tempotrace_sdk import ClockQuality, HeaderError, LamportClock, Sketch, TsSource, TTExt
from tempotrace_sdk.wire import LAMPORT_MAX_AHEAD, sketch_indices

VECTORS = pathlib.Path(__file__).resolve().parents[2] / "conformance" / "vectors"


def _cases(name: str) -> Iterator[Any]:
    data = json.loads((VECTORS / name).read_text(encoding="utf-8"))
    for group in data["testGroups"]:
        for test in group["tests"]:
            yield pytest.param(group["type"], test, id=f"{group['type']}-{test['tcId']}")


def _fields(header: TTExt) -> dict[str, Any]:
    return {
        "tenantId": header.tenant_id,
        "version": 3,
        "ptpNs": str(header.ptp_ns),
        "tsSource": header.ts_source.name,
        "clkQuality": header.clk_quality.name,
        "uncertaintyNs": header.uncertainty_ns,
        "lts": str(header.lts),
        "svcSketch": header.svc_sketch.to_bytes().hex(),
    }


def _enum(kind: type[TsSource] | type[ClockQuality], value: str | int) -> Any:
    return kind[value] if isinstance(value, str) else value


def _expect_error(test: dict[str, Any], action: Callable[[], object]) -> None:
    with pytest.raises(HeaderError) as info:
        action()
    assert info.value.error_class == test["errorClass"], test.get("comment")


@pytest.mark.parametrize(("kind", "test"), list(_cases("tt_ext_v3_header_test.json")))
def test_header_vector(kind: str, test: dict[str, Any]) -> None:
    """Binary decode (spec §4), text decode (§5), encode (§2, §9.2)."""
    if kind == "TtExtEncode":
        f = test["fields"]

        def action() -> TTExt:
            return TTExt(
                ptp_ns=int(f["ptpNs"]),
                ts_source=_enum(TsSource, f["tsSource"]),
                clk_quality=_enum(ClockQuality, f["clkQuality"]),
                uncertainty_ns=f["uncertaintyNs"],
                lts=int(f["lts"]),
                svc_sketch=Sketch.from_bytes(bytes.fromhex(f["svcSketch"])),
                tenant_id=f["tenantId"],
            )

        if test["result"] == "invalid":
            _expect_error(test, action)
            return
        header = action()
        assert header.encode().hex() == test["wire"]
        assert header.to_header() == test["text"]
        return

    if kind == "TtExtBinaryDecode":
        decode: Callable[[], TTExt] = lambda: TTExt.decode(bytes.fromhex(test["wire"]))  # noqa: E731
    elif kind == "TtExtTextDecode":
        decode = lambda: TTExt.from_header(test["text"])  # noqa: E731
    else:
        raise AssertionError(f"unknown group type {kind}")
    if test["result"] == "invalid":
        _expect_error(test, decode)
        with pytest.raises(HeaderError) as info:
            decode()
        assert info.value.remote, "errors on received bytes are marked remote"
        return
    header = decode()
    assert _fields(header) == test["fields"]
    assert header.encode().hex() == test["reencoded"]
    if kind == "TtExtBinaryDecode":
        assert header.to_header() == test["text"]
    else:
        assert TTExt.decode(bytes.fromhex(test["wire"])) == header


@pytest.mark.parametrize(("kind", "test"), list(_cases("tt_ext_v3_sketch_test.json")))
def test_sketch_vector(kind: str, test: dict[str, Any]) -> None:
    """Hash (spec §8.1-8.2), merge (§8.3), membership and FP estimate (§8.4)."""
    if kind == "SvcSketchHash":
        span_id = bytes.fromhex(test["spanId"])
        if test["result"] == "invalid":
            _expect_error(test, lambda: sketch_indices(span_id))
            _expect_error(test, lambda: Sketch.of(span_id))
            return
        assert list(sketch_indices(span_id)) == test["indices"]
        assert Sketch.of(span_id).popcount == test["popcount"] == len(set(test["indices"]))
        assert list(sketch_indices(int.from_bytes(span_id, "big"))) == test["indices"]
        assert Sketch.of(span_id).to_bytes().hex() == test["sketch"]
        assert Sketch.EMPTY.with_span(span_id).to_bytes().hex() == test["sketch"]
    elif kind == "SvcSketchMerge":
        merged = Sketch.EMPTY
        for raw in test["sketches"]:
            merged = merged | Sketch.from_bytes(bytes.fromhex(raw))
        assert merged.to_bytes().hex() == test["merged"]
        assert merged.popcount == test["popcount"]
    elif kind == "SvcSketchMembership":
        sketch = Sketch.from_bytes(bytes.fromhex(test["sketch"]))
        span_id = bytes.fromhex(test["spanId"])
        assert sketch.contains(span_id) is test["member"]
        assert (span_id in sketch) is test["member"]
        assert sketch.popcount == test["popcount"]
        assert sketch.false_positive_rate() == test["falsePositiveEstimate"]
    else:
        raise AssertionError(f"unknown group type {kind}")


@pytest.mark.parametrize(("kind", "test"), list(_cases("tt_ext_v3_lamport_test.json")))
def test_lamport_vector(kind: str, test: dict[str, Any]) -> None:
    """tick / merge / the merge bound / refusal / saturation (spec §10, §10.1).

    Each merge runs through both ``merge`` and ``receive`` (on twin clocks):
    they must agree on the value, and ``receive`` must say whether the remote
    value was merged, which the vector shows by the value (remote + 1 or more
    when merged, local + 1 when not).
    """
    assert kind == "LamportSequence"
    if "results" not in test:  # the start value itself is refused
        _expect_error(test, lambda: LamportClock(int(test["start"])))
        return
    clock = LamportClock(int(test["start"]))
    twin = LamportClock(int(test["start"]))
    for op, expected in zip(test["ops"], test["results"], strict=True):
        before = clock.value
        if "errorClass" in expected:
            _expect_error(expected, lambda op=op: clock.merge(int(op["remote"])))
            _expect_error(expected, lambda op=op: twin.receive(int(op["remote"])))
            assert clock.value == twin.value == before, "a refused merge leaves the counter unchanged"
            continue
        if op["op"] == "tick":
            got = clock.tick()
            assert twin.tick() == got
        else:
            remote = int(op["remote"])
            got = clock.merge(remote)
            received, merged = twin.receive(remote)
            assert received == got
            assert merged is (remote - before <= LAMPORT_MAX_AHEAD)
            if not merged:
                assert got == min(before + 1, 2**63 - 1), "a receive that is not merged is a plain tick"
        assert str(got) == expected["lts"]
        assert clock.value == got
    assert str(clock.value) == test["final"]
    assert clock.saturated is test["saturated"] is twin.saturated
    assert ("errorClass" in test) is (test["result"] == "invalid")


def test_every_vector_file_and_group_type_is_exercised() -> None:
    """A new vector file or group type must not be skipped silently."""
    kinds = set()
    for path in VECTORS.glob("*.json"):
        kinds |= {group["type"] for group in json.loads(path.read_text(encoding="utf-8"))["testGroups"]}
    assert kinds == {
        "TtExtBinaryDecode",
        "TtExtTextDecode",
        "TtExtEncode",
        "SvcSketchHash",
        "SvcSketchMerge",
        "SvcSketchMembership",
        "LamportSequence",
        # the torch record's (spec/torch.md §3): exercised by tests/torch/test_record.py
        "TorchRecordDecode",
        "TorchRecordReceive",
        "TorchRecordEncode",
        # the stamps text's (spec/semantic-conventions.md §1.4): exercised by tests/otel/test_otel_stamps_vectors.py
        "StampsDecode",
        "StampsEncode",
    }
