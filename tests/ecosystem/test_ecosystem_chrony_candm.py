"""chronyd's command protocol, TRACKING only (spec/clocks.md §3.1; chrony candm.h, pktlength.c, util.c).

The golden reply and chronyc's text are in _chrony_golden.py.
"""

from __future__ import annotations

import errno
import math
import struct

import pytest
from _chrony_golden import GOLDEN_REPLY, GOLDEN_SEQUENCE

from tempotrace_sdk.clocks.chrony_candm import (
    REPLY_LEN,
    REQUEST_LEN,
    decode_float,
    decode_tracking_reply,
    encode_float,
    encode_tracking_request,
    reply_sequence,
)
from tempotrace_sdk.errors import ClockError


def test_golden_reply_decodes_to_what_chronyc_printed() -> None:
    t = decode_tracking_reply(GOLDEN_REPLY, GOLDEN_SEQUENCE)
    assert (t.ref_id, t.ref_address, t.stratum, t.leap_status) == (0x0A4D0001, "10.77.0.1", 2, 0)
    assert int(t.ref_time_s) == 1796059889  # Mon Nov 30 17:31:29 2026 UTC
    assert f"{-t.current_correction_s:.9f}" == "0.000002599"  # "fast": the correction is negative
    assert f"{t.root_delay_s:.9f}" == "0.000008518" and f"{t.skew_ppm:.3f}" == "0.015"
    # chrony's root dispersion grows between reports: ours was read after chronyc's
    assert 0.000291749 <= t.root_dispersion_s < 0.000291749 + 1e-6
    assert f"{t.last_update_interval_s:.1f}" == "0.8"


def test_request_is_padded_to_the_reply_length_with_our_sequence() -> None:
    """pktlength.c: a request is padded to its reply's size so chronyd never amplifies traffic."""
    raw = encode_tracking_request(0xDEADBEEF)
    assert len(raw) == REQUEST_LEN == REPLY_LEN == 104
    assert struct.unpack(">BBBBHHIII", raw[:20]) == (6, 1, 0, 0, 33, 0, 0xDEADBEEF, 0, 0)
    assert raw[20:] == bytes(84)


@pytest.mark.parametrize("value", [0.0, 1.0, -1.0, 3.161e-6, -2.5e-5, 1e-9, 0.3, 123.456, 1e6, 2.0**-60])
def test_float_round_trips_within_25_bits(value: float) -> None:
    got = decode_float(encode_float(value))
    assert got == pytest.approx(value, rel=2**-23, abs=0)


@pytest.mark.parametrize(
    ("value", "word"),
    [(1.0, 0x04800000), (-1.0, 0x03000000), (0.0, 0), (float("nan"), 0), (1e-30, 0)],
    ids=["one", "minus one", "zero", "nan is sent as zero", "underflow to zero"],
)
def test_float_words_as_util_c_writes_them(value: float, word: int) -> None:
    assert encode_float(value) == word


def test_float_overflow_saturates_at_the_largest_float() -> None:
    largest = ((1 << 24) - 1) * 2.0 ** (63 - 25)  # FLOAT_COEF_MAX * 2^(FLOAT_EXP_MAX - 25)
    assert decode_float(encode_float(1e200)) == largest
    assert decode_float(encode_float(-1e200)) == -largest - 2.0**38
    assert math.isfinite(decode_float(0xFFFFFFFF))


def _with(offset: int, fmt: str, value: int, data: bytes = GOLDEN_REPLY) -> bytes:
    buf = bytearray(data)
    struct.pack_into(fmt, buf, offset, value)
    return bytes(buf)


@pytest.mark.parametrize(
    ("name", "data", "words"),
    [
        ("too short for a header", GOLDEN_REPLY[:20], "shorter than the 28-byte header"),
        ("older protocol", _with(0, ">B", 5), "protocol version 5"),
        ("a request, not a reply", _with(1, ">B", 1), "not a command reply"),
        ("answer to another command", _with(4, ">H", 14), "another request"),
        ("answer to another sequence", _with(16, ">I", 7), "another request"),
        ("refused from this socket", _with(8, ">H", 2), "UNAUTH"),
        ("another reply format", _with(6, ">H", 2), "reply format 2"),
        ("truncated body", GOLDEN_REPLY[:80], "expected 104"),
    ],
)
def test_bad_replies_raise_eproto_naming_the_problem(name: str, data: bytes, words: str) -> None:
    with pytest.raises(ClockError) as caught:
        decode_tracking_reply(data, GOLDEN_SEQUENCE)
    assert caught.value.errno == errno.EPROTO and words in str(caught.value), name


def test_reply_sequence_reads_the_echo() -> None:
    assert reply_sequence(GOLDEN_REPLY) == GOLDEN_SEQUENCE
    assert reply_sequence(GOLDEN_REPLY[:10]) is None
