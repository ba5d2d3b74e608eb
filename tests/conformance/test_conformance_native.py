"""The C codec and the Python codec answer alike, through the protocol, beyond the vectors.

The C adapter is compiled here (gcc, -Werror: conftest.py) from native/ttext so
the test does not depend on a previous `make` step. Both adapters are driven through the
runner's own Adapter class: hostile text (NUL, lone surrogates, non-ASCII,
inputs around the 256-octet cap), out-of-type encoder values, malformed
request lines, and Hypothesis-generated inputs must get the same answer from
both (spec/tt-ext-v3.md text and binary rules; conformance/PROTOCOL.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the runner lives in the repository, not in the installed package
    sys.path.insert(0, str(ROOT))

from conformance.runner.adapter import Adapter  # noqa: E402
from conformance.runner.vectors import norm_response  # noqa: E402
from tempotrace_sdk.wire import LAMPORT_MAX_AHEAD  # noqa: E402

TEXT = "AxeXnQbTiTJ7AAAA3AAAAAAAAAAqAAAAAAAAAAAEAAIAAQAAgAAAAAAAAQAIAEACAAAAAAA"
WIRE = bytes.fromhex(
    "0317979d06d389327b000000dc000000000000002a0000000000000000040002000100008000000000000100080040020000000000"
)


@pytest.fixture(scope="module")
def pair(c_adapter: Path) -> Iterator[tuple[Adapter, Adapter]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    py = Adapter("python", [sys.executable, str(ROOT / "conformance" / "adapters" / "python_adapter.py")], env=env)
    c = Adapter("c", [str(c_adapter)])
    yield py, c
    py.close()
    c.close()
    assert py.problems == [] and c.problems == []


def both(pair: tuple[Adapter, Adapter], request: dict[str, Any]) -> dict[str, Any]:
    """Ask both; assert they agree; return the (normalised) answer."""
    py, c = pair
    a, b = norm_response(py.ask(request)), norm_response(c.ask(request))
    assert a == b, f"python {a} != c {b} for {request}"
    return a


@pytest.mark.parametrize(
    ("text", "error_class"),
    [
        pytest.param(TEXT, None, id="canonical"),
        pytest.param(" \t" + TEXT + "\t ", None, id="ows-stripped"),
        pytest.param(TEXT[:10] + "\x00" + TEXT[11:], "TEXT_ALPHABET", id="nul-inside"),
        pytest.param(TEXT[:10] + "\ud800" + TEXT[11:], "TEXT_ALPHABET", id="lone-surrogate"),
        pytest.param(TEXT[:69] + "\U0001f600", "TEXT_ALPHABET", id="astral-char-70-chars"),
        pytest.param("\u00e9" * 128, "TEXT_ALPHABET", id="128-chars-256-utf8-octets-at-cap"),
        pytest.param("\u00e9" * 200, "TEXT_LENGTH", id="200-chars-400-utf8-octets-over-cap"),
        pytest.param("\u00e9" * 257, "TEXT_LENGTH", id="257-chars-over-cap"),
        pytest.param(" " * 185 + TEXT, None, id="256-octets-at-cap"),
        pytest.param(" " * 186 + TEXT, "TEXT_LENGTH", id="257-octets-cap-before-strip"),
        pytest.param("\U0001f600" * 100, "TEXT_LENGTH", id="100-astral-chars-400-octets"),
        pytest.param("A" * 254 + "\ud800", "TEXT_LENGTH", id="lone-surrogate-counts-3-octets"),
        pytest.param(TEXT + "\r\n", "TEXT_ALPHABET", id="crlf-not-ows"),
        pytest.param(TEXT + "\u00a0", "TEXT_ALPHABET", id="nbsp-not-ows"),
        pytest.param(TEXT + "=,", "TEXT_MULTIPLE", id="comma-beats-padding"),
    ],
)
def test_hostile_text_gets_the_same_answer(pair: tuple[Adapter, Adapter], text: str, error_class: str | None) -> None:
    """spec §5.2: the cap counts UTF-8 octets (a lone surrogate 3), so both codecs count it alike."""
    answer = both(pair, {"op": "decode_text", "text": text})
    assert answer.get("errorClass") == error_class
    if error_class is None:
        assert answer["wire"] == WIRE.hex()


@pytest.mark.parametrize(
    ("field", "value", "error_class"),
    [
        ("tenantId", "99999999999999999999999", "TENANT_ID"),
        ("ptpNs", "-99999999999999999999", "PTP_NS_RANGE"),
        ("ptpNs", "18446744073709551616", "PTP_NS_RANGE"),
        ("tsSource", "-4294967296", "TS_SOURCE"),
        ("clkQuality", "4294967298", "CLK_QUALITY"),
        ("uncertaintyNs", "4294967296", "UNCERTAINTY_RANGE"),
        ("lts", "-1", "LTS_RANGE"),
        ("lts", "340282366920938463463374607431768211456", "LTS_RANGE"),
    ],
)
def test_values_beyond_64_bits_are_refused_by_rule(
    pair: tuple[Adapter, Adapter], field: str, value: str, error_class: str
) -> None:
    """spec §9.2: an encoder refuses out-of-range values; C types must not wrap them into range."""
    request = {"op": "encode", "tenantId": "1", "ptpNs": "5", "tsSource": "0", "clkQuality": "0",
               "uncertaintyNs": "10", "lts": "7", "svcSketch": "00" * 32, field: value}  # fmt: skip
    assert both(pair, request) == {"errorClass": error_class}


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("not json", "adapterError"),
        ('{"id":"1","op":"decode_bytes","wire":"0g"}', "adapterError"),
        ('{"id":"2","op":"decode_bytes","wire":"030"}', "adapterError"),
        ('{"id":"3"}', "adapterError"),
        ('{"id":"4","op":"frobnicate"}', "unsupported"),
        ('{"id":"5","op":"sketch_merge","sketches":["00"]}', "adapterError"),
        ('{"id":"6","op":"lamport","start":"0","steps":["jump"]}', "adapterError"),
    ],
)
def test_malformed_requests_are_answered_not_fatal(c_adapter: Path, line: str, kind: str) -> None:
    """PROTOCOL.md: a bad request gets one answer line and the adapter keeps serving."""
    script = line + "\n" + '{"id":"9","op":"decode_bytes","wire":"03"}\n'
    for argv in ([str(c_adapter)], [sys.executable, str(ROOT / "conformance" / "adapters" / "python_adapter.py")]):
        res = subprocess.run(argv, input=script, capture_output=True, text=True, timeout=30,
                             env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})  # fmt: skip
        lines = res.stdout.splitlines()
        assert res.returncode == 0, res.stderr
        assert len(lines) == 2, lines
        assert f'"{kind}"' in lines[0], (argv[0], lines[0])
        assert lines[1] == '{"id":"9","errorClass":"LENGTH"}'


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=80) | st.binary(min_size=53, max_size=53))
def test_random_bytes_same_answer(pair: tuple[Adapter, Adapter], data: bytes) -> None:
    both(pair, {"op": "decode_bytes", "wire": data.hex()})


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from("AQgw-_=,+/ \t\u00e9\x00Zz09"), max_size=300)
    | st.text(max_size=90)
    | st.builds(lambda i, c: TEXT[:i] + c + TEXT[i + 1 :], st.integers(0, 70), st.characters())
    # around the 256-octet cap with 1-, 2-, 3- (lone surrogate) and 4-octet characters
    | st.text(alphabet=st.sampled_from("AAAA \u00e9\ud800\udc00\U0001f600,"), min_size=60, max_size=260)
)
def test_random_text_same_answer(pair: tuple[Adapter, Adapter], text: str) -> None:
    both(pair, {"op": "decode_text", "text": text})


@settings(max_examples=100, deadline=None)
@given(span=st.binary(min_size=0, max_size=10), sketch=st.binary(min_size=32, max_size=32))
def test_random_sketch_ops_same_answer(pair: tuple[Adapter, Adapter], span: bytes, sketch: bytes) -> None:
    both(pair, {"op": "sketch_indices", "spanId": span.hex()})
    if len(span) == 8:
        both(pair, {"op": "sketch_contains", "sketch": sketch.hex(), "spanId": span.hex()})


@settings(max_examples=150, deadline=None)
@given(
    start=st.integers(0, 2**63 - 1) | st.just(2**63 - 2) | st.integers(-2, 2**64 + 2),
    steps=st.lists(
        st.just("tick")
        | st.integers(-1, 2**64).map(lambda r: f"merge:{r}")
        | st.integers(LAMPORT_MAX_AHEAD - 3, LAMPORT_MAX_AHEAD + 3),  # this far ahead of start
        max_size=6,
    ),
)
def test_random_lamport_same_answer(pair: tuple[Adapter, Adapter], start: int, steps: list[str | int]) -> None:
    """Both counters agree on ticks, merges, the merge bound (spec §10.1) and refused starts."""
    wire_steps = [s if isinstance(s, str) else f"merge:{start + s}" for s in steps]
    both(pair, {"op": "lamport", "start": str(start), "steps": wire_steps})


# -- the torch record (spec/torch.md §3.1, §3.2) ------------------------------------------------
RECORD = bytes.fromhex(
    "01000000000300000000000000074bf92f3577b34da6a3ce929d0e0e473600f067aa0ba902b7" + WIRE.hex() + "523b683e"
)


def _with_crc(body: bytes) -> bytes:
    return body + zlib.crc32(body).to_bytes(4, "big")


def _poked(offset: int, value: int) -> bytes:
    return _with_crc(RECORD[:offset] + bytes([value]) + RECORD[offset + 1 : 91])


@settings(max_examples=300, deadline=None)
@given(
    data=st.binary(max_size=120)
    | st.binary(min_size=95, max_size=95)
    # version 1 and a right CRC: the kind and the embedded header decide
    | st.binary(min_size=90, max_size=90).map(lambda b: _with_crc(b"\x01" + b))
    # one octet of the worked example changed, the CRC made right again
    # one octet of the worked example changed, the CRC made right again
    | st.builds(_poked, st.integers(1, 90), st.integers(0, 255)),
    kind=st.sampled_from(["0", "1"]),
)
def test_random_records_same_answer(pair: tuple[Adapter, Adapter], data: bytes, kind: str) -> None:
    """Both codecs read any octets alike, and the receiver's checks alike (checks 1-9 in order)."""
    both(pair, {"op": "decode_record", "record": data.hex()})
    both(pair, {"op": "receive_record", "record": data.hex(), "expectKind": kind, "expectRank": "3", "expectSeq": "7"})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("seq", "18446744073709551616"),
        ("seq", "-18446744073709551615"),
        ("seq", "340282366920938463463374607431768211456"),
        ("rank", "-4294967296"),
        ("rank", "18446744073709551617"),
        ("kind", "4294967296"),
        ("kind", "-4294967295"),
    ],
)
def test_record_values_beyond_64_bits_are_refused_not_wrapped(
    pair: tuple[Adapter, Adapter], field: str, value: str
) -> None:
    """§3.2: RECORD_FIELD for a value outside its range; a C type must not wrap it into range."""
    request = {"op": "encode_record", "kind": "0", "rank": "3", "seq": "7", "traceId": "ab" * 16, "spanId": "cd" * 8,
               "header": WIRE.hex(), field: value}  # fmt: skip
    assert both(pair, request) == {"errorClass": "RECORD_FIELD"}


T_NS = 1_700_000_000_000_000_000
STAMPS_TEXTS = [
    "s81234,0 e3",
    "s5,0\x00 e1",
    "s5,0 e1\ud800",
    "s5,0 \u00e9 x1,1",
    "s5,0 x1,1 x\U0001f600",
    "s5,0,-18446744110709551614",
    "s5,0,18446744073709551615",
    "s9223372036854775807,2 e-9223372036854775807,-99999999999999999999,0,0",
    "s5,0 r3,9223372036854775807,6,1,2,7,-9223372036854775802",
    "s5,0 k" + "_" * 42 + "8",
    "s5,0 k" + "_" * 43,
]


@pytest.mark.parametrize("text", STAMPS_TEXTS)
@pytest.mark.parametrize("start_ns", [0, T_NS, 2**64 - 1])
def test_hostile_stamps_texts_get_the_same_answer(pair: tuple[Adapter, Adapter], text: str, start_ns: int) -> None:
    """semantic-conventions §1.4: NUL, non-ASCII, lone surrogates, sums beyond 64 bits, alike in both codecs."""
    base = {"op": "decode_stamps", "text": text, "startTimeUnixNano": str(start_ns), "endTimeUnixNano": str(start_ns)}
    answer = both(pair, base)
    assert ("errorClass" in answer) or answer["canonical"] == text


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet="serkx0123456789,- _AB8\x00\u00e9", max_size=80),
    start_ns=st.sampled_from([0, T_NS, 2**64 - 1]),
    plain=st.booleans(),
)
def test_random_stamps_texts_same_answer(pair: tuple[Adapter, Adapter], text: str, start_ns: int, plain: bool) -> None:
    request = {"op": "decode_stamps", "text": "s5,0 " + text, "startTimeUnixNano": str(start_ns),
               "endTimeUnixNano": str(start_ns)}  # fmt: skip
    if plain:
        request.update(uncertaintyNs="220", clkQuality="1")
    both(pair, request)
