/*
 * record.h -- C99 reference codec for the record tempotrace_sdk.torch carries
 * between ranks (spec/torch.md section 3.1, 3.2): one rank's tt-ext send
 * event plus the ids the analysis needs, in all_gather exchanges and p2p
 * side messages.
 *
 * Written from the spec, not from tempotrace_sdk/torch/record.py, so that the
 * conformance vectors (conformance/vectors/tt_torch_record_test.json) are
 * checked by two independent implementations.  libc only; no allocation;
 * every input is a (pointer, length) pair and nothing is read past it.
 *
 * Layout, 95 octets, integers (the CRC too) big-endian:
 *   off  0   1  version   1
 *   off  1   1  kind      0 exchange, 1 p2p side message
 *   off  2   4  rank      uint32, the sender's global rank
 *   off  6   8  seq       uint64: step number, collective seq or p2p seq
 *   off 14  16  trace_id  the sending span's trace id, W3C order (zero: no span)
 *   off 30   8  span_id   the sending span's id, W3C order (zero: no span)
 *   off 38  53  header    tt-ext v3 binary form of the send event (ttext.h)
 *   off 91   4  crc32     CRC-32/ISO-HDLC (zlib's) of octets 0..90
 * 95 zero octets, CRC field included, are the absent record.
 */
#ifndef TTEXT_RECORD_H
#define TTEXT_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "ttext.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TTREC_LEN 95          /* the whole record */
#define TTREC_BODY_LEN 91     /* octets 0..90: what the CRC covers */
#define TTREC_VERSION 1       /* octet 0 */
#define TTREC_HEADER_OFF 38   /* where the tt-ext header starts */
#define TTREC_TRACE_ID_LEN 16
#define TTREC_SPAN_ID_LEN 8
#define TTREC_RANK_MAX UINT64_C(0xFFFFFFFF) /* rank is a uint32 on the wire */

/* kind values. */
enum { TTREC_KIND_EXCHANGE = 0, TTREC_KIND_P2P = 1 };

/*
 * Result of every fallible call; each non-zero value but TTREC_E_ARGUMENT is
 * an errorClass of the conformance vectors, named by ttrec_status_name().
 */
typedef enum ttrec_status {
    TTREC_OK = 0,
    /* received octets: the codec's checks, in this order (spec 3.2 checks 1-6) */
    TTREC_E_LENGTH,   /* not exactly 95 octets */
    TTREC_E_ABSENT,   /* 95 zero octets: the sender had no record */
    TTREC_E_VERSION,  /* octet 0 is not 1 */
    TTREC_E_CHECKSUM, /* octets 91..94 are not the CRC-32 of octets 0..90 */
    TTREC_E_KIND,     /* octet 1 is neither 0 nor 1: no such kind */
    TTREC_E_HEADER,   /* the embedded header breaks a tt-ext binary rule (its own status is reported too) */
    /* the receiver's checks against what it expects (checks 7, 8, 9) */
    TTREC_E_UNEXPECTED_KIND, /* a kind that exists, but not the one expected */
    TTREC_E_RANK,     /* not from the rank expected */
    TTREC_E_SEQ,      /* not for the sequence number expected */
    /* building a record (the caller's values) */
    TTREC_E_FIELD,    /* kind, rank or header out of range */
    /* C only */
    TTREC_E_ARGUMENT  /* NULL pointer */
} ttrec_status;

/*
 * The errorClass name of a status ("OK", "RECORD_LENGTH", ..., "RECORD_FIELD",
 * "ARGUMENT"); a static string, never NULL ("UNKNOWN_STATUS" outside the enum).
 */
const char *ttrec_status_name(ttrec_status status);

/*
 * A decoded record, or one to encode.  kind and rank are wider than on the
 * wire so that ttrec_encode() refuses out-of-range values instead of
 * truncating them.  After a successful decode every field is in range.
 */
typedef struct ttrec_record {
    uint32_t kind;   /* TTREC_KIND_* */
    uint64_t rank;   /* 0..2^32-1 */
    uint64_t seq;    /* any value */
    uint8_t trace_id[TTREC_TRACE_ID_LEN];
    uint8_t span_id[TTREC_SPAN_ID_LEN];
    ttext_header header;
} ttrec_record;

/*
 * CRC-32/ISO-HDLC of len octets at buf: reflected polynomial 0xEDB88320,
 * register preset 0xFFFFFFFF, result XORed with 0xFFFFFFFF (zlib's crc32;
 * "123456789" gives 0xCBF43926).  buf may be NULL when len is 0.
 */
uint32_t ttrec_crc32(const uint8_t *buf, size_t len);

/*
 * Check the caller's record (kind 0 or 1, rank 0..2^32-1, a header
 * ttext_encode() accepts; else TTREC_E_FIELD) and write its 95 octets to out:
 * the header as ttext_encode() writes it (quality UNKNOWN: uncertainty
 * 0xFFFF), then the CRC.  out is untouched on error.
 */
ttrec_status ttrec_encode(const ttrec_record *r, uint8_t out[TTREC_LEN]);

/*
 * Decode and check len octets at buf (a peer's), first failure wins:
 * TTREC_E_LENGTH, TTREC_E_ABSENT, TTREC_E_VERSION, TTREC_E_CHECKSUM,
 * TTREC_E_KIND, TTREC_E_HEADER.  On TTREC_E_HEADER, *header_status (when not
 * NULL) is the embedded header's own status from ttext_decode(); otherwise it
 * is TTEXT_OK.  *out is written only on success; its header is as
 * ttext_decode() reports it.
 */
ttrec_status ttrec_decode(const uint8_t *buf, size_t len, ttrec_record *out, ttext_status *header_status);

/*
 * ttrec_decode(), then the receiver's checks against what it expects, first
 * failure wins: TTREC_E_UNEXPECTED_KIND (not expect_kind), TTREC_E_RANK, TTREC_E_SEQ.
 * *out is written only on success.
 */
ttrec_status ttrec_receive(const uint8_t *buf, size_t len, uint32_t expect_kind, uint64_t expect_rank,
                           uint64_t expect_seq, ttrec_record *out, ttext_status *header_status);

#ifdef __cplusplus
}
#endif

#endif /* TTEXT_RECORD_H */
