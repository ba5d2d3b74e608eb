"""The conformance runner catches wrong, missing and disagreeing answers (conformance/PROTOCOL.md).

Each test runs the real `conformance/run` on a small vector file written here,
against the Python-codec adapter and/or a deliberately broken copy of it
(broken_adapter.py), and checks what a user would read: the exit status, the
failure report (tcId, input, both answers) and the summary line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the runner lives in the repository, not in the installed package
    sys.path.insert(0, str(ROOT))

from conformance.runner.vectors import load_cases  # noqa: E402

RUN = ROOT / "conformance" / "run"
BROKEN = Path(__file__).with_name("broken_adapter.py")

TYPICAL_TEXT = "AxeXnQbTiTJ7AAAA3AAAAAAAAAAqAAAAAAAAAAAEAAIAAQAAgAAAAAAAAQAIAEACAAAAAAA"
TYPICAL_WIRE = (
    "0317979d06d389327b000000dc000000000000002a0000000000000000040002000100008000000000000100080040020000000000"
)
TYPICAL_FIELDS = {
    "clkQuality": "OK",
    "lts": "42",
    "ptpNs": "1700000037000000123",
    "svcSketch": "0000000000000000040002000100008000000000000100080040020000000000",
    "tenantId": 0,
    "tsSource": "GTE",
    "uncertaintyNs": 220,
}

# A handful of vectors in the format of conformance/vectors/*.json, one per request kind.
VECTORS = {
    "algorithm": "tt-ext-v3",
    "testGroups": [
        {
            "type": "TtExtTextDecode",
            "tests": [
                {
                    "tcId": 2001,
                    "comment": "typical",
                    "result": "valid",
                    "text": f" {TYPICAL_TEXT}\t",
                    "fields": {**TYPICAL_FIELDS, "version": 3},
                    "wire": TYPICAL_WIRE,
                    "reencoded": TYPICAL_WIRE,
                },
                {
                    "tcId": 2044,
                    "comment": "last character 'B' has low bits 01",
                    "result": "invalid",
                    "errorClass": "TEXT_NON_CANONICAL",
                    "text": TYPICAL_TEXT[:-1] + "B",
                },
            ],
        },
        {
            "type": "TtExtBinaryDecode",
            "tests": [{"tcId": 1033, "comment": "1 byte", "result": "invalid", "errorClass": "LENGTH", "wire": "03"}],
        },
        {
            "type": "TtExtEncode",
            "tests": [
                {
                    "tcId": 3001,
                    "comment": "typical",
                    "result": "valid",
                    "fields": TYPICAL_FIELDS,
                    "wire": TYPICAL_WIRE,
                    "text": TYPICAL_TEXT,
                }
            ],
        },
        {
            "type": "SvcSketchHash",
            "tests": [
                {
                    "tcId": 1004,
                    "comment": "bytes 01..08",
                    "result": "valid",
                    "spanId": "0102030405060708",
                    "h1": "11306300771342204892",
                    "h2": "14224590727137307655",
                    "indices": [220, 227, 234, 241],
                    "sketch": "0000000000000000000000000000000000000000000000000000000810204000",
                }
            ],
        },
        {
            "type": "LamportSequence",
            "tests": [
                {
                    "tcId": 1007,
                    "comment": "remote 2^63 refused",
                    "result": "invalid",
                    "start": "4",
                    "ops": [{"op": "merge", "remote": "9223372036854775808"}, {"op": "tick"}],
                    "results": [{"errorClass": "LTS_RANGE"}, {"lts": "5"}],
                    "final": "5",
                    "saturated": False,
                }
            ],
        },
    ],
}
N = 6


@pytest.fixture()
def vectors(tmp_path: Path) -> Path:
    path = tmp_path / "mini_test.json"
    path.write_text(json.dumps(VECTORS))
    return path


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run([str(RUN), *args], capture_output=True, text=True, timeout=timeout, env=env)


def broken(bug: str) -> str:
    return f"broken={sys.executable} {BROKEN} {bug}"


def test_correct_adapter_passes_every_vector(vectors: Path) -> None:
    res = run("--impl", "python", str(vectors))
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"python: {N} passed, 0 failed" in res.stdout
    assert res.stdout.rstrip().endswith(f"{N} passed, 0 failed")


def test_wrong_error_class_reports_tcid_input_and_both_answers(vectors: Path) -> None:
    res = run("--impl", "python", "--impl", broken("wrong-text-class"), str(vectors))
    assert res.returncode == 1
    out = res.stdout
    assert "FAIL broken: mini_test.json tcId 2044" in out
    assert "DISAGREE python vs broken: mini_test.json tcId 2044" in out
    assert TYPICAL_TEXT[:-1] + "B" in out  # the input
    assert '"errorClass": "TEXT_NON_CANONICAL"' in out  # python's answer / the expectation
    assert '"errorClass": "TEXT_LENGTH"' in out  # the broken answer
    assert f"broken: {N - 1} passed, 1 failed" in out
    assert f"python: {N} passed, 0 failed" in out
    assert "disagreements between implementations: 1" in out


def test_wrong_sketch_index_is_caught(vectors: Path) -> None:
    res = run("--impl", broken("index-off-by-one"), str(vectors))
    assert res.returncode == 1
    assert "tcId 1004" in res.stdout
    assert "indices: expected" in res.stdout


def test_disagreement_on_unstated_key_fails_although_both_pass(vectors: Path) -> None:
    """Both answers match the vector; they differ in popcount, which this mini vector does not state."""
    res = run("--impl", "python", "--impl", broken("extra-popcount"), str(vectors))
    assert res.returncode == 1
    assert f"broken: {N} passed, 0 failed" in res.stdout
    assert "DISAGREE python vs broken: mini_test.json tcId 1004" in res.stdout
    assert '"popcount": "5"' in res.stdout and '"popcount": "4"' in res.stdout


def test_differential_inputs_find_a_disagreement_the_vectors_miss(vectors: Path) -> None:
    """Mutated vector inputs reach a bug no vector covers; the report names the input and both answers."""
    res = run("--impl", "python", "--impl", broken("newline-as-length"), "--differential", "1000", str(vectors))
    assert res.returncode == 1
    assert f"broken: {N} passed, 0 failed" in res.stdout
    assert "DISAGREE python vs broken: differential input #" in res.stdout
    assert "\\n" in res.stdout  # the input, JSON-escaped
    assert "differential: 1000 mutated inputs compared" in res.stdout


def test_differential_needs_two_implementations(vectors: Path) -> None:
    res = run("--impl", "python", "--differential", "10", str(vectors))
    assert res.returncode == 2


def test_crashing_adapter_is_reported_and_restarted(vectors: Path) -> None:
    res = run("--impl", broken("crash-on-lamport"), str(vectors))
    assert res.returncode == 1
    assert "adapter exited without answering" in res.stdout
    assert "ADAPTER broken: adapter died on request" in res.stdout
    assert f"broken: {N - 1} passed, 1 failed" in res.stdout


def test_hanging_adapter_times_out_and_later_vectors_still_run(vectors: Path) -> None:
    res = run("--timeout", "1", "--impl", broken("hang-on-encode"), str(vectors))
    assert res.returncode == 1
    assert "adapter timed out" in res.stdout
    assert f"broken: {N - 1} passed, 1 failed" in res.stdout


def test_mismatched_response_id_fails(vectors: Path) -> None:
    res = run("--impl", broken("wrong-id"), str(vectors))
    assert res.returncode == 1
    assert f"broken: 0 passed, {N} failed" in res.stdout
    assert "does not match request id" in res.stdout


def test_unsupported_op_is_a_failure_not_a_skip(vectors: Path) -> None:
    res = run("--impl", broken("unsupported-lamport"), str(vectors))
    assert res.returncode == 1
    assert "tcId 1007" in res.stdout and '"unsupported": "lamport"' in res.stdout


def test_unknown_group_type_refuses_to_run(tmp_path: Path) -> None:
    path = tmp_path / "future_test.json"
    path.write_text(json.dumps({"testGroups": [{"type": "TtExtV4Decode", "tests": []}]}))
    res = run("--impl", "python", str(path))
    assert res.returncode == 2
    assert "unknown test group type 'TtExtV4Decode'" in res.stderr


def test_missing_c_adapter_says_how_to_build_it(vectors: Path, tmp_path: Path) -> None:
    res = run("--impl", "c", "--c-adapter", str(tmp_path / "nope"), str(vectors))
    assert res.returncode == 2
    assert "make conformance-c-build" in res.stdout + res.stderr


def test_vector_translation_uses_protocol_representation(vectors: Path) -> None:
    cases = {c.tc_id: c for c in load_cases([vectors])}
    enc = cases[3001].request
    assert enc == {
        "op": "encode",
        "tenantId": "0",
        "ptpNs": "1700000037000000123",
        "tsSource": "0",
        "clkQuality": "0",
        "uncertaintyNs": "220",
        "lts": "42",
        "svcSketch": TYPICAL_FIELDS["svcSketch"],
    }
    assert cases[1007].request == {"op": "lamport", "start": "4", "steps": ["merge:9223372036854775808", "tick"]}
    assert cases[1007].expect == {"values": ["LTS_RANGE", "5"], "final": "5", "saturated": "false"}
    assert cases[2044].expect == {"errorClass": "TEXT_NON_CANONICAL"}
    assert cases[1004].expect["indices"] == ["220", "227", "234", "241"]


def test_wrong_popcount_fails_against_the_real_vectors() -> None:
    """Issue 15: popcount in a sketch_indices answer is pinned by every SvcSketchHash vector now."""
    res = run("--impl", broken("extra-popcount"), str(ROOT / "conformance" / "vectors" / "tt_ext_v3_sketch_test.json"))
    assert res.returncode == 1
    assert 'popcount: expected "4", got "5"' in res.stdout


def test_lamport_start_out_of_range_is_a_vector() -> None:
    """Issue 15: a refused start is answered with errorClass alone, and a vector says so."""
    cases = {c.tc_id: c for c in load_cases([ROOT / "conformance" / "vectors" / "tt_ext_v3_lamport_test.json"])}
    refused = [c for c in cases.values() if c.expect == {"errorClass": "LTS_RANGE"}]
    starts = {c.request["start"] for c in refused}
    assert {"-1", str(2**63), str(2**64 + 5)} <= starts


@pytest.mark.parametrize(
    ("bug", "caught_by"),
    [
        ("cap-in-characters", "256 x U+00E9: 256 characters but 512 UTF-8 octets"),
        ("cap-in-utf16-units", "64 x U+1F600 + 'A': 257 octets (129 UTF-16 code units"),
        ("lone-surrogate-as-one-octet", "254 x 'A' + lone surrogate U+D800: 257 octets"),
    ],
)
def test_vectors_alone_catch_each_way_of_miscounting_the_text_cap(bug: str, caught_by: str) -> None:
    """Issue 15: such bugs used to pass every vector (the differential run found them in 1-4 of 20k inputs)."""
    res = run("--impl", broken(bug), str(ROOT / "conformance" / "vectors" / "tt_ext_v3_header_test.json"))
    assert res.returncode == 1
    assert caught_by in res.stdout


def test_vectors_catch_a_lamport_merge_without_the_bound() -> None:
    res = run(
        "--impl", broken("unbounded-lamport"), str(ROOT / "conformance" / "vectors" / "tt_ext_v3_lamport_test.json")
    )
    assert res.returncode == 1
    assert "remote 2^44+1 ahead of 0: not merged" in res.stdout
    assert "remote 2^63-1 from a fresh counter: over the bound" in res.stdout


@pytest.mark.parametrize(
    ("bug", "caught_by"),
    [
        ("record-kind-before-crc", "kind 2 and a wrong CRC: CRC is checked first"),
        ("record-receiver-first", "wrong kind and an invalid header: the codec's checks come first"),
        ("record-no-header-class", 'headerErrorClass: expected "TS_SOURCE", got "<missing>"'),
        ("record-seq-32-bits", "seq 2^32+7 where 7 is expected: all 8 octets count"),
        ("record-kind-one-name", "exchange record where a p2p side message is expected"),
        ("record-id-length-unchecked", "trace id of 15 octets"),
    ],
)
def test_record_vectors_catch_each_misreading_of_the_checks(bug: str, caught_by: str) -> None:
    """spec/torch.md §3.2: the order of the checks, the header's own class, a 64-bit seq are all pinned."""
    res = run("--impl", broken(bug), str(ROOT / "conformance" / "vectors" / "tt_torch_record_test.json"))
    assert res.returncode == 1
    assert caught_by in res.stdout


@pytest.mark.parametrize(
    ("bug", "caught_by"),
    [
        ("stamps-count-last", "2^20+1 sends after a broken start: counted before anything is decoded"),
        ("stamps-padding-unchecked", "sketch last character B: padding bits 01"),
        ("stamps-dt-always", "start only, read at the OpenTelemetry time: dt left out"),
        ("stamps-empty-for-absent", 'endPtpNs: expected no such key (the value is absent), got ""'),
        ("stamps-plain-unchecked", "bound 70000 without the quality"),
    ],
)
def test_stamps_vectors_catch_each_misreading_of_the_text(bug: str, caught_by: str) -> None:
    """semantic-conventions §1.4: the count before the tokens, the sketch's padding bits, dt 0 left out; issue 20:
    absent values as absent keys (PROTOCOL.md), the plain attributes range-checked, not taken for absent."""
    res = run("--impl", broken(bug), str(ROOT / "conformance" / "vectors" / "tt_stamps_text_test.json"))
    assert res.returncode == 1
    assert caught_by in res.stdout
