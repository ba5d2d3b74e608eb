"""The tt-ext v3 wire layout, defined once (spec/tt-ext-v3.md §2).

Every other module takes offsets, sizes, limits and enum values from here. Public: the
clocks, the processor, the analysis and the torch record all build on these names, and
code outside the SDK (an exporter, a reader) may too; they change only with the wire version.
"""

from __future__ import annotations

import enum
import struct

#: The only version this codec speaks (low nibble of byte 0).
VERSION = 3

#: Size of the binary form in bytes (spec §2).
HEADER_LEN = 53

#: Length of the text form: ceil(53 * 8 / 6) base64url characters, no padding.
TEXT_LEN = 71

#: Header names on the wire (spec §4, §5, §6).
TEXT_HEADER = "tt-ext"
BINARY_HEADER = "tt-ext-bin"
TRACESTATE_KEY = "tt"

# ">B q B B H Q 32s": version_flags, ptp_ns, ts_source, clk_quality,
# uncertainty_ns, lts, svc_sketch.  Network byte order throughout (spec §2).
STRUCT = struct.Struct(">BqBBHQ32s")
assert STRUCT.size == HEADER_LEN

#: The 21 bytes before the sketch. 21 is a multiple of 3, so in the text form
#: they are exactly the first 28 characters and the sketch the last 43.
STRUCT_HEAD = struct.Struct(">BqBBHQ")
assert STRUCT_HEAD.size == 21 and STRUCT_HEAD.size % 3 == 0

OFF_VERSION_FLAGS = 0
OFF_PTP_NS = 1
OFF_TS_SOURCE = 9
OFF_CLK_QUALITY = 10
OFF_UNCERTAINTY_NS = 11
OFF_LTS = 13
OFF_SVC_SKETCH = 21

#: tenant_id lives in the high nibble of byte 0.
TENANT_MAX = 15

#: uncertainty_ns is a uint16; this value means "at least 65,535 ns".
UNCERTAINTY_SATURATED = 0xFFFF

#: ptp_ns is an int64 that must not be negative.
PTP_NS_MAX = 2**63 - 1

#: lts values >= 2**63 are invalid on the wire (poisoning guard, spec §3.6, §12.1);
#: a local counter saturates here instead of wrapping.
LTS_MAX = 2**63 - 1

#: The SVC sketch: a Bloom filter of M bits with K hash functions (spec §8).
SKETCH_BITS = 256
SKETCH_BYTES = SKETCH_BITS // 8
SKETCH_HASHES = 4
#: MurmurHash3_x64_128 seed used for sketch bit indices.
SKETCH_SEED = 0

#: A span id is 8 bytes, big-endian, as in W3C traceparent.
SPAN_ID_MAX = 2**64 - 1


class TsSource(enum.IntEnum):
    """Where ptp_ns was read from (byte 9)."""

    GTE = 0  #: the NIC's PTP hardware clock (GPU timestamp engine path)
    SW_GCC = 1  #: a software-calibrated device clock
    CPU = 2  #: the host CPU clock (CLOCK_TAI)


class ClockQuality(enum.IntEnum):
    """How far the clock's claimed bound can be trusted (byte 10)."""

    OK = 0  #: synchronised; uncertainty_ns is a 3-sigma bound
    DEGRADED = 1  #: holdover or partial sync; bound widened to match
    UNKNOWN = 2  #: no usable physical time; never order by ptp_ns
