#!/usr/bin/env python3
"""Generate the conformance vectors (conformance/vectors/*.json): tt-ext v3, the torch record, the stamps text.

Deterministic: the same script writes the same bytes. Expected values come
from reference.py, reference_record.py and reference_stamps.py (first
principles, see their docstrings), never from the codec under test.
MurmurHash3 is cross-checked against the mmh3 package for every span id
used, the record's CRC-32 against zlib for every record written.

    python conformance/tools/generate.py           # (re)write the files
    python conformance/tools/generate.py --check   # exit 1 if they differ

Canonical JSON (conformance/README.md): UTF-8, keys sorted, 2-space indent,
", " / ": " separators, non-ASCII escaped as \\uXXXX, one trailing newline.

tcIds are stable: each group owns a block of 1000 ids (group n: n*1000+1..);
new cases are appended at the end of their group, never inserted.
"""

from __future__ import annotations

import json
import pathlib
import sys
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import cases_header
import cases_lamport
import cases_record
import cases_record_sides
import cases_sketch
import cases_stamps
import cases_stamps_refused
import cases_text

ROOT = pathlib.Path(__file__).resolve().parents[1]
VECTORS = ROOT / "vectors"
GENERATOR_VERSION = "1.2.0"

# What a flag means and which kind of bug it hunts (Wycheproof "notes").
NOTES: dict[str, tuple[str, str]] = {
    "Typical": ("BASIC", "An ordinary header as a healthy producer writes it."),
    "FieldLimit": ("EDGE_CASE", "A field at the smallest or largest value its rule allows."),
    "EnumValue": ("BASIC", "Each defined ts_source / clk_quality value (spec 3.3, 3.4)."),
    "Tenant": ("EDGE_CASE", "tenant_id 0 (default) and 15 share byte 0 with the version (spec 3.1)."),
    "Saturated": ("EDGE_CASE", "uncertainty_ns 0xFFFF means 'at least 65,535 ns' (spec 3.5)."),
    "UnknownQuality": (
        "NORMALISATION",
        "clk_quality UNKNOWN: decoders report uncertaintyNs 65535 whatever the wire says; encoders write "
        "0xFFFF (spec 3.5).",
    ),
    "Sketch": ("EDGE_CASE", "Empty, full and patterned SVC sketches; bit order MSB first (spec 8.1)."),
    "Length": ("BASIC", "The binary form must be exactly 53 bytes (spec 4)."),
    "Version": ("BASIC", "The low nibble of byte 0 must be 3 (spec 3.1)."),
    "NibbleOrder": ("EDGE_CASE", "tenant_id is the HIGH nibble, version the LOW nibble of byte 0."),
    "NegativePtp": ("EDGE_CASE", "ptp_ns is a signed int64 that must not be negative (spec 3.2)."),
    "BadEnum": ("BASIC", "ts_source / clk_quality values outside their enumeration (spec 3.3, 3.4)."),
    "LtsPoisoning": ("POISONING", "lts >= 2^63 is refused so one hop cannot exhaust every counter (spec 3.6)."),
    "Precedence": ("PRECEDENCE", "Several rules broken: the first in spec 9.1 order names the error class."),
    "Ows": ("BASIC", "Surrounding spaces and tabs (HTTP OWS) are stripped; nothing else is (spec 5.2)."),
    "Padding": ("MALLEABILITY", "'=' padding is not part of the text form (spec 5.2)."),
    "Alphabet": ("MALLEABILITY", "Only A-Z a-z 0-9 - _ are allowed; no standard-base64 '+' '/' (spec 5.2)."),
    "TextLength": ("BASIC", "After OWS stripping the value must be exactly 71 characters (spec 5.2)."),
    "InputCap": (
        "DOS",
        "Values longer than 256 octets (UTF-8, as received) are refused before any other work (spec 5.2).",
    ),
    "OctetCount": (
        "EDGE_CASE",
        "The cap counts octets: 2 to 4 per non-ASCII character, not characters or UTF-16 code units (spec 5.2).",
    ),
    "LoneSurrogate": (
        "EDGE_CASE",
        "A lone surrogate (JSON and UTF-16 strings can hold one) counts 3 octets and is outside the alphabet "
        "(spec 5.2).",
    ),
    "NonCanonical": (
        "MALLEABILITY",
        "The 2 unused low bits of the last character must be zero, else two texts decode to one header (spec 5.2).",
    ),
    "MultipleValues": ("BASIC", "A comma-joined list of values is invalid (spec 5.3)."),
    "TextThenBinary": ("BASIC", "A well-formed text whose 53 bytes break a binary rule (spec 9.1)."),
    "CallerError": ("BASIC", "An encoder refuses field values outside their rule (spec 9.2)."),
    "SpanIdHash": (
        "BASIC",
        "MurmurHash3_x64_128 words, the 4 bit indices of a span id and the bits they set (spec 8.1, 8.2).",
    ),
    "IndexCollision": ("EDGE_CASE", "Two or more of the 4 indices coincide: fewer than 4 bits set."),
    "SpanIdLength": ("BASIC", "A span id is exactly 8 bytes (spec 8.1)."),
    "Merge": ("BASIC", "Merging is bitwise OR; merging nothing gives the empty sketch (spec 8.3)."),
    "Membership": ("BASIC", "Member iff all 4 bits are set; FP estimate (popcount/256)^4 (spec 8.4)."),
    "FalsePositive": ("EDGE_CASE", "A span id never added that the sketch nevertheless contains."),
    "Lamport": ("BASIC", "tick: lts+1; merge: max(lts, remote)+1 (spec 10)."),
    "LamportBound": (
        "POISONING",
        "A remote lts more than 2^44 (LAMPORT_MAX_AHEAD) ahead of the counter is not merged: the receive is a "
        "plain tick (spec 10.1).",
    ),
    "LamportStart": ("BASIC", "A start outside 0..2^63-1 refuses the whole sequence: LTS_RANGE (spec 10)."),
    "LamportSaturation": ("POISONING", "The counter stops at 2^63-1 and never wraps (spec 10)."),
    "LamportRefused": ("POISONING", "A remote lts outside 0..2^63-1 is refused, counter unchanged (spec 10)."),
    # -- the carried record (spec/torch.md section 3) --------------------------------
    "Record": ("BASIC", "An ordinary record as a rank sends it (torch 3.1)."),
    "RecordKindValue": ("BASIC", "Each defined kind: 0 exchange, 1 p2p side message (torch 3.1)."),
    "RankSeqLimit": (
        "EDGE_CASE",
        "rank (uint32) and seq (uint64) at the ends of their ranges: no value is refused, 2^31 and 2^63 are not "
        "negative, and an encoder refuses values beyond them instead of wrapping (torch 3.1).",
    ),
    "ByteOrder": ("EDGE_CASE", "Multi-octet integers, the CRC included, are big-endian (torch 3.1)."),
    "ZeroIds": ("EDGE_CASE", "Trace and span ids are not checked; all zero means sent outside any span (torch 3.1)."),
    "EmbeddedHeader": ("BASIC", "The embedded 53-octet tt-ext header is reported as tt-ext decodes it (torch 3.2)."),
    "HeaderNormalised": (
        "NORMALISATION",
        "An embedded header with quality UNKNOWN is reported with uncertainty 65535 and (re-)encoded with 0xFFFF, "
        "under a CRC computed over those octets (torch 3.1, tt-ext 3.5).",
    ),
    "RecordLength": ("BASIC", "A record is exactly 95 octets (torch 3.2 check 1)."),
    "AbsentRecord": (
        "BASIC",
        "95 zero octets, CRC field included, are the absent record: the sender had none; counted as missing, not "
        "as invalid (torch 3.1, 3.2 check 2).",
    ),
    "RecordVersion": ("BASIC", "Octet 0 must be 1 (torch 3.2 check 3)."),
    "Checksum": ("BASIC", "Octets 91..94 must be the CRC-32 of octets 0..90 (torch 3.2 check 4)."),
    "CrcVariant": (
        "EDGE_CASE",
        "A CRC computed the wrong way: little-endian, preset 0, no final XOR, MSB first, CRC-32C, over the wrong "
        "octets (torch 3.1).",
    ),
    "BadKind": ("BASIC", "Octet 1 must be 0 or 1 (torch 3.2 check 5)."),
    "HeaderError": (
        "BASIC",
        "The embedded header breaks a tt-ext binary rule: RECORD_HEADER, and headerErrorClass names the rule "
        "(torch 3.2 check 6, tt-ext 9.1).",
    ),
    "RecordPrecedence": ("PRECEDENCE", "Several rules broken: the first in torch 3.2 order names the class."),
    "Expectation": (
        "BASIC",
        "The receiver's checks: kind, rank and seq against what it expects, after the codec's (torch 3.2 checks 7-9).",
    ),
    "RecordEncode": ("BASIC", "Building a record from field values (torch 3.1)."),
    "RecordField": ("BASIC", "A record encoder refuses a field outside its rule: RECORD_FIELD (torch 3.2)."),
    "IdLength": (
        "BASIC",
        "A trace id is 16 octets and a span id 8: an id of another length is the caller's RECORD_FIELD, never "
        "padded or cut (torch 3.2).",
    ),
}

TT_EXT = "tt-ext-v3"
FILES: dict[str, tuple[str, str, list[str]]] = {
    "tt_ext_v3_header_test.json": (
        TT_EXT,
        "tt_ext_v3_header_test_schema.json",
        [
            "Decoding the binary and text forms of tt-ext v3 and encoding field values (spec/tt-ext-v3.md).",
            "64-bit integers are decimal strings; byte strings are lower-case hex.",
            "For an invalid input only errorClass is normative; for a valid one every listed field is.",
        ],
    ),
    "tt_ext_v3_sketch_test.json": (
        TT_EXT,
        "tt_ext_v3_sketch_test_schema.json",
        ["The 256-bit SVC Bloom sketch: span id hashing, merging and membership (spec/tt-ext-v3.md section 8)."],
    ),
    "tt_ext_v3_lamport_test.json": (
        TT_EXT,
        "tt_ext_v3_lamport_test_schema.json",
        [
            "The per-process Lamport counter: ticks, merges, the merge bound, refusal and saturation "
            "(spec/tt-ext-v3.md section 10)."
        ],
    ),
    "tt_torch_record_test.json": (
        "tt-torch-record-v1",
        "tt_torch_record_test_schema.json",
        [
            "The 95-octet record ranks carry in torch.distributed exchanges and p2p side messages: layout, CRC-32, "
            "the absent record, the reading checks in order and building a record (spec/torch.md section 3).",
            "64-bit integers are decimal strings; byte strings are lower-case hex; the embedded header's fields are "
            "reported as in tt_ext_v3_header_test.json.",
            "For an invalid input errorClass (and, for RECORD_HEADER, headerErrorClass) is normative.",
        ],
    ),
    "tt_stamps_text_test.json": (
        "tt-stamps-text-v1",
        "tt_stamps_text_test_schema.json",
        [
            "The tempotrace.stamps span attribute: reading a span's stamps text into absolute values, given the "
            "span's OpenTelemetry times and plain attributes, and writing the one canonical text of such values "
            "(spec/semantic-conventions.md section 1.4).",
            "64-bit integers are decimal strings; a long text is given as textParts (pieces and repeat counts).",
            "For an invalid input only errorClass is normative; for a valid one every listed field is.",
        ],
    ),
}


def canonical(obj: Any) -> str:
    """The one byte form every vector file has (see module docstring)."""
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=True, separators=(",", ": ")) + "\n"


def _file(
    name: str, groups: list[tuple[str, list[dict[str, Any]]]], notes: dict[str, tuple[str, str]] = NOTES
) -> dict[str, Any]:
    algorithm, schema, header = FILES[name]
    test_groups = []
    used: set[str] = set()
    count = 0
    for number, (group_type, tests) in enumerate(groups, start=1):
        numbered = []
        for offset, test in enumerate(tests, start=1):
            numbered.append({"tcId": number * 1000 + offset, **test})
            used.update(test["flags"])
        if len(tests) >= 1000:
            raise SystemExit(f"{name}: group {group_type} outgrew its tcId block")
        count += len(tests)
        test_groups.append({"type": group_type, "tests": numbered})
    unknown = used - notes.keys()
    if unknown:
        raise SystemExit(f"{name}: flags without notes: {sorted(unknown)}")
    return {
        "algorithm": algorithm,
        "schema": schema,
        "generatorVersion": GENERATOR_VERSION,
        "numberOfTests": count,
        "header": header,
        "notes": {flag: {"bugType": notes[flag][0], "description": notes[flag][1]} for flag in sorted(used)},
        "testGroups": test_groups,
    }


def build() -> dict[str, str]:
    """File name -> canonical text of every vector file."""
    files = {
        "tt_ext_v3_header_test.json": _file(
            "tt_ext_v3_header_test.json",
            [
                ("TtExtBinaryDecode", cases_header.binary_decode()),
                ("TtExtTextDecode", cases_text.text_decode_cases()),
                ("TtExtEncode", cases_header.encode()),
            ],
        ),
        "tt_ext_v3_sketch_test.json": _file(
            "tt_ext_v3_sketch_test.json",
            [
                ("SvcSketchHash", cases_sketch.hashing()),
                ("SvcSketchMerge", cases_sketch.merging()),
                ("SvcSketchMembership", cases_sketch.membership()),
            ],
        ),
        "tt_ext_v3_lamport_test.json": _file(
            "tt_ext_v3_lamport_test.json", [("LamportSequence", cases_lamport.lamport())]
        ),
        "tt_torch_record_test.json": _file(
            "tt_torch_record_test.json",
            [
                ("TorchRecordDecode", cases_record.decode()),
                ("TorchRecordReceive", cases_record_sides.receive()),
                ("TorchRecordEncode", cases_record_sides.encode()),
            ],
        ),
        "tt_stamps_text_test.json": _file(
            "tt_stamps_text_test.json",
            [
                (
                    "StampsDecode",
                    cases_stamps.decode_valid()
                    + cases_stamps_refused.decode_invalid()
                    + cases_stamps_refused.decode_plain(),
                ),
                ("StampsEncode", cases_stamps.encode_cases()),
            ],
            cases_stamps.NOTES,
        ),
    }
    return {name: canonical(obj) for name, obj in files.items()}


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for name, text in build().items():
        path = VECTORS / name
        if check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            VECTORS.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT.parent)} ({json.loads(text)['numberOfTests']} tests)")
    if stale:
        print("stale vector files (run conformance/tools/generate.py):", ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
