/*
 * ttext.h -- C99 reference codec for the tt-ext v3 trace header.
 *
 * Written from spec/tt-ext-v3.md (and the wire contract of issue 2), not
 * from the Python codec, so that the conformance vectors are checked by two
 * independent implementations.  libc only; no allocation; every input is a
 * (pointer, length) pair and nothing is read past it.
 *
 * Wire layout (all integers big-endian), 53 bytes:
 *   off  0  1  version_flags  bits 7..4 tenant_id (0..15), bits 3..0 version (3)
 *   off  1  8  ptp_ns         int64, ns since the PTP epoch (TAI), >= 0
 *   off  9  1  ts_source      0 GTE, 1 SW_GCC, 2 CPU
 *   off 10  1  clk_quality    0 OK, 1 DEGRADED, 2 UNKNOWN
 *   off 11  2  uncertainty_ns uint16, 3-sigma bound; 0xFFFF = saturated
 *   off 13  8  lts            uint64 Lamport counter, < 2^63
 *   off 21 32  svc_sketch     256-bit Bloom filter (k = 4, MurmurHash3)
 *
 * Thread safety: every function is reentrant; a ttext_lamport value must be
 * serialised by its owner (C99 has no atomics).
 */
#ifndef TTEXT_H
#define TTEXT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version of this library's API/ABI; bump on any incompatible change. */
#define TTEXT_LIB_VERSION 2 /* 2: octet-based text cap, bounded Lamport merge */

/* Sizes fixed by the wire contract (spec: header layout, text form). */
#define TTEXT_WIRE_LEN 53       /* binary header length in bytes */
#define TTEXT_VERSION 3         /* low nibble of byte 0 */
#define TTEXT_TEXT_LEN 71       /* base64url of 53 bytes, no padding */
#define TTEXT_TEXT_BUF 72       /* TTEXT_TEXT_LEN + NUL terminator */
#define TTEXT_TEXT_MAX_INPUT 256 /* longer inputs (in octets as received,
                                   before stripping) are refused unread:
                                   bounds the work a hostile carrier can cause */
#define TTEXT_SKETCH_BYTES 32   /* m = 256 bits */
#define TTEXT_SKETCH_BITS 256
#define TTEXT_SKETCH_K 4        /* bits set per span id */
#define TTEXT_SPAN_ID_LEN 8     /* W3C span id, big-endian */

/* Field limits (spec: header layout). */
#define TTEXT_TENANT_MAX 15u
#define TTEXT_UNCERTAINTY_MAX 65535u   /* 0xFFFF: ">= 65,535 ns" */
#define TTEXT_LTS_MAX UINT64_C(0x7FFFFFFFFFFFFFFF) /* 2^63 - 1 */
/* A received lts more than this far ahead of the local counter is not merged
 * (spec section 10.1, Lamport poisoning containment). */
#define TTEXT_LAMPORT_MAX_AHEAD (UINT64_C(1) << 44)

/* ts_source values. */
enum { TTEXT_SRC_GTE = 0, TTEXT_SRC_SW_GCC = 1, TTEXT_SRC_CPU = 2 };
/* clk_quality values. */
enum { TTEXT_Q_OK = 0, TTEXT_Q_DEGRADED = 1, TTEXT_Q_UNKNOWN = 2 };

/*
 * Result of every fallible call.  Each non-zero value corresponds one to one
 * with a language-neutral errorClass of the conformance vectors; its name is
 * given by ttext_status_name().  TTEXT_E_ARGUMENT is C-only (NULL pointer or
 * a caller buffer that is too small) and never appears in vectors.
 */
typedef enum ttext_status {
    TTEXT_OK = 0,
    /* wire (remote peer's bytes), checked in this order */
    TTEXT_E_LENGTH,            /* binary input is not 53 bytes */
    TTEXT_E_VERSION,           /* low nibble of byte 0 is not 3 */
    TTEXT_E_PTP_NS_RANGE,      /* ptp_ns < 0 */
    TTEXT_E_TS_SOURCE,         /* ts_source > 2 */
    TTEXT_E_CLK_QUALITY,       /* clk_quality > 2 */
    TTEXT_E_LTS_RANGE,         /* lts >= 2^63 */
    /* encode side (caller's values) */
    TTEXT_E_TENANT_ID,         /* tenant_id > 15 */
    TTEXT_E_UNCERTAINTY_RANGE, /* uncertainty_ns > 65535 */
    /* text form, checked before the wire rules, in this order */
    TTEXT_E_TEXT_LENGTH,       /* > 256 octets, or not 71 after stripping */
    TTEXT_E_TEXT_MULTIPLE,     /* several values (contains ',') */
    TTEXT_E_TEXT_PADDING,      /* contains '=' */
    TTEXT_E_TEXT_ALPHABET,     /* a character outside A-Z a-z 0-9 - _ */
    TTEXT_E_TEXT_NON_CANONICAL,/* unused low 2 bits of the last char set */
    TTEXT_E_TEXT_TYPE,         /* carrier value is not a string (adapters) */
    /* sketch */
    TTEXT_E_SPAN_ID,           /* a span id is not exactly 8 bytes */
    /* C only */
    TTEXT_E_ARGUMENT           /* NULL pointer or output buffer too small */
} ttext_status;

/*
 * Return the errorClass name of a status ("OK", "LENGTH", "VERSION",
 * "PTP_NS_RANGE", ..., "TEXT_NON_CANONICAL", "TEXT_TYPE", "SPAN_ID", "ARGUMENT");
 * a static string, never NULL ("UNKNOWN_STATUS" for values outside the enum).
 */
const char *ttext_status_name(ttext_status status);

/*
 * The decoded header.  Integer fields are wider than on the wire so that
 * ttext_encode() can reject out-of-range caller values instead of silently
 * truncating them.  After a successful decode every field is in range.
 */
typedef struct ttext_header {
    uint32_t tenant_id;      /* 0..15 */
    int64_t ptp_ns;          /* >= 0 */
    uint32_t ts_source;      /* TTEXT_SRC_* */
    uint32_t clk_quality;    /* TTEXT_Q_* */
    uint32_t uncertainty_ns; /* 0..65535; always 65535 when UNKNOWN */
    uint64_t lts;            /* 0..2^63-1 */
    uint8_t svc_sketch[TTEXT_SKETCH_BYTES];
} ttext_header;

/*
 * Validate the caller's header (TENANT_ID, PTP_NS_RANGE, TS_SOURCE,
 * CLK_QUALITY, UNCERTAINTY_RANGE, LTS_RANGE, first failure wins) and write
 * the 53 wire bytes to out.  With clk_quality UNKNOWN the uncertainty is
 * written as 0xFFFF whatever the caller passed (it must still be in range).
 * out is untouched on error.
 */
ttext_status ttext_encode(const ttext_header *h, uint8_t out[TTEXT_WIRE_LEN]);

/*
 * Decode and validate len bytes at buf (a remote peer's bytes).  Checks, first
 * failure wins: LENGTH (len != 53), VERSION, PTP_NS_RANGE, TS_SOURCE,
 * CLK_QUALITY, LTS_RANGE.  The tenant nibble is reported, never interpreted.
 * With clk_quality UNKNOWN any uncertainty is accepted and 65535 reported.
 * *out is written only on success.
 */
ttext_status ttext_decode(const uint8_t *buf, size_t len, ttext_header *out);

/*
 * Encode the header (as ttext_encode) and write its 71-character base64url
 * text form plus a NUL terminator to out.
 */
ttext_status ttext_to_text(const ttext_header *h, char out[TTEXT_TEXT_BUF]);

/*
 * Text form -> raw 53 bytes, applying only the text rules: more than 256
 * octets (len, counted before stripping) -> TEXT_LENGTH;
 * strip surrounding spaces and tabs; then TEXT_MULTIPLE (','), TEXT_PADDING
 * ('='), TEXT_ALPHABET (any byte outside A-Za-z0-9-_, so all non-ASCII),
 * TEXT_LENGTH (not 71), TEXT_NON_CANONICAL.  text need not be NUL-terminated;
 * exactly len bytes are read.  out is written only on success.
 */
ttext_status ttext_text_to_bytes(const char *text, size_t len, uint8_t out[TTEXT_WIRE_LEN]);

/*
 * Decode a carrier's text value: ttext_text_to_bytes() then ttext_decode(),
 * so text errors take precedence over wire errors.
 */
ttext_status ttext_from_text(const char *text, size_t len, ttext_header *out);

/*
 * The k = 4 bit indices of a span id: MurmurHash3_x64_128 of its 8
 * big-endian bytes with seed 0 gives h1, h2; index i = (h1 + i*h2) mod 2^64
 * mod 256 for i = 0..3 (indices may repeat).
 */
void ttext_sketch_indices(const uint8_t span_id[TTEXT_SPAN_ID_LEN], unsigned idx[TTEXT_SKETCH_K]);

/* Same for a span id of len bytes; TTEXT_E_SPAN_ID unless len == 8. */
ttext_status ttext_sketch_indices_n(const uint8_t *span_id, size_t len, unsigned idx[TTEXT_SKETCH_K]);

/* Same, for a span id held as an integer (big-endian serialisation). */
void ttext_sketch_indices_u64(uint64_t span_id, unsigned idx[TTEXT_SKETCH_K]);

/* Set the span id's 4 bits in sketch (bit j: byte j/8, mask 0x80 >> j%8). */
void ttext_sketch_add(uint8_t sketch[TTEXT_SKETCH_BYTES], const uint8_t span_id[TTEXT_SPAN_ID_LEN]);

/* 1 when all 4 bits of the span id are set in sketch (maybe a false positive), else 0. */
int ttext_sketch_contains(const uint8_t sketch[TTEXT_SKETCH_BYTES], const uint8_t span_id[TTEXT_SPAN_ID_LEN]);

/* dst |= src (merging two causal pasts). */
void ttext_sketch_merge(uint8_t dst[TTEXT_SKETCH_BYTES], const uint8_t src[TTEXT_SKETCH_BYTES]);

/* Number of set bits, 0..256. */
unsigned ttext_sketch_popcount(const uint8_t sketch[TTEXT_SKETCH_BYTES]);

/*
 * Estimated false-positive probability of ttext_sketch_contains() on this
 * sketch, (popcount/256)^4 (assumes independent, uniform bit positions).
 */
double ttext_sketch_fp_rate(const uint8_t sketch[TTEXT_SKETCH_BYTES]);

/*
 * A Lamport counter; start it with {0, 0} or ttext_lamport_init().
 * value never exceeds TTEXT_LTS_MAX.  saturated is sticky: it becomes 1 the
 * first time a tick or merge could not advance the counter because it would
 * have passed 2^63-1 (reaching 2^63-1 exactly is not saturation).
 */
typedef struct ttext_lamport {
    uint64_t value;
    int saturated;
} ttext_lamport;

/* Start a counter at start (not saturated); TTEXT_E_LTS_RANGE, clock untouched, if start >= 2^63. */
ttext_status ttext_lamport_init(ttext_lamport *clock, uint64_t start);

/*
 * Local event: value += 1, or, at 2^63-1, stay there and mark the counter
 * saturated (never wraps).  Returns the counter's saturated flag, so the
 * caller can report it.
 */
int ttext_lamport_tick(ttext_lamport *clock);

/*
 * Receive: value = max(value, remote) + 1; when that would pass 2^63-1 the
 * value becomes 2^63-1 and the counter is marked saturated.  A remote value
 * more than TTEXT_LAMPORT_MAX_AHEAD ahead of value is not merged: the
 * receive is a plain tick and *merged is set to 0 (else 1), so the caller can
 * record that this hop carries no Lamport evidence; merged may be NULL.  A
 * remote value >= 2^63 is a poisoned header: TTEXT_E_LTS_RANGE, clock and
 * *merged unchanged.
 */
ttext_status ttext_lamport_receive(ttext_lamport *clock, uint64_t remote, int *merged);

/* ttext_lamport_receive() without the merged flag. */
ttext_status ttext_lamport_merge(ttext_lamport *clock, uint64_t remote);

#ifdef __cplusplus
}
#endif

#endif /* TTEXT_H */
