/*
 * test_record.c -- unit tests of the carried-record codec (record.h) that do
 * not need the vector files: CRC-32 known answers, the spec's worked example
 * (spec/torch.md section 3.1), round trips at the field limits, every error
 * class and the order of the checks (section 3.2).  Exit status 0 when every
 * check passes; each failure prints its line.
 */
#include <stdio.h>
#include <string.h>

#include "record.h"
#include "test_check.h"

#define CHECK_ST(expr, want) CHECK_STATUS(ttrec_status, ttrec_status_name, expr, want)

/* spec/torch.md section 3.1, worked example: rank 3's record of step 7. */
static const char *EXAMPLE_HEX = "01000000000300000000000000074bf92f3577b34da6a3ce929d0e0e473600f067aa0ba902b7"
                                 "0317979d06d389327b000000dc000000000000002a000000000000000004000200010000800000"
                                 "0000000100080040020000000000523b683e";

static void from_hex(const char *hex, uint8_t *out, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
}

static ttrec_record example(void)
{
    static const uint8_t trace[TTREC_TRACE_ID_LEN] = {0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6,
                                                      0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36};
    static const uint8_t span[TTREC_SPAN_ID_LEN] = {0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7};
    static const uint8_t sketch_a[8] = {0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7};
    static const uint8_t sketch_b[8] = {0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31};
    ttrec_record r;
    memset(&r, 0, sizeof r);
    r.kind = TTREC_KIND_EXCHANGE;
    r.rank = 3;
    r.seq = 7;
    memcpy(r.trace_id, trace, sizeof trace);
    memcpy(r.span_id, span, sizeof span);
    r.header.ptp_ns = INT64_C(1700000037000000123);
    r.header.uncertainty_ns = 220;
    r.header.lts = 42;
    ttext_sketch_add(r.header.svc_sketch, sketch_a);
    ttext_sketch_add(r.header.svc_sketch, sketch_b);
    return r;
}

static int rec_eq(const ttrec_record *a, const ttrec_record *b)
{
    return a->kind == b->kind && a->rank == b->rank && a->seq == b->seq &&
           memcmp(a->trace_id, b->trace_id, TTREC_TRACE_ID_LEN) == 0 &&
           memcmp(a->span_id, b->span_id, TTREC_SPAN_ID_LEN) == 0 &&
           a->header.tenant_id == b->header.tenant_id && a->header.ptp_ns == b->header.ptp_ns &&
           a->header.ts_source == b->header.ts_source && a->header.clk_quality == b->header.clk_quality &&
           a->header.uncertainty_ns == b->header.uncertainty_ns && a->header.lts == b->header.lts &&
           memcmp(a->header.svc_sketch, b->header.svc_sketch, TTEXT_SKETCH_BYTES) == 0;
}

/* Make octets 91..94 the right CRC again after a change. */
static void recrc(uint8_t raw[TTREC_LEN])
{
    uint32_t crc = ttrec_crc32(raw, TTREC_BODY_LEN);
    raw[91] = (uint8_t)(crc >> 24);
    raw[92] = (uint8_t)(crc >> 16);
    raw[93] = (uint8_t)(crc >> 8);
    raw[94] = (uint8_t)crc;
}

static void test_crc32(void)
{
    static const uint8_t zeros[TTREC_BODY_LEN] = {0};
    CHECK(ttrec_crc32(NULL, 0) == 0);
    CHECK(ttrec_crc32((const uint8_t *)"123456789", 9) == UINT32_C(0xCBF43926)); /* the catalogue's check value */
    CHECK(ttrec_crc32((const uint8_t *)"a", 1) == UINT32_C(0xE8B7BE43));
    CHECK(ttrec_crc32(zeros, sizeof zeros) == UINT32_C(0x6DB3309A)); /* zlib.crc32(bytes(91)) */
}

static void test_layout_and_example(void)
{
    ttrec_record r = example(), back;
    uint8_t raw[TTREC_LEN], want[TTREC_LEN], hdr[TTEXT_WIRE_LEN];

    from_hex(EXAMPLE_HEX, want, sizeof want);
    CHECK_ST(ttrec_encode(&r, raw), TTREC_OK);
    CHECK(memcmp(raw, want, TTREC_LEN) == 0);
    CHECK(raw[0] == 1 && raw[1] == 0 && raw[5] == 3 && raw[13] == 7 && raw[14] == 0x4b && raw[30] == 0x00);
    CHECK(ttext_encode(&r.header, hdr) == TTEXT_OK && memcmp(raw + TTREC_HEADER_OFF, hdr, sizeof hdr) == 0);
    CHECK(raw[91] == 0x52 && raw[92] == 0x3b && raw[93] == 0x68 && raw[94] == 0x3e); /* big-endian CRC */
    CHECK_ST(ttrec_decode(raw, sizeof raw, &back, NULL), TTREC_OK);
    CHECK(rec_eq(&r, &back));
}

static void test_limits_round_trip(void)
{
    ttrec_record r = example(), back;
    uint8_t raw[TTREC_LEN];

    r.kind = TTREC_KIND_P2P;
    r.rank = TTREC_RANK_MAX;
    r.seq = UINT64_MAX;
    memset(r.trace_id, 0xFF, sizeof r.trace_id);
    memset(r.span_id, 0, sizeof r.span_id);
    CHECK_ST(ttrec_encode(&r, raw), TTREC_OK);
    CHECK(raw[2] == 0xFF && raw[5] == 0xFF && raw[6] == 0xFF && raw[13] == 0xFF);
    CHECK_ST(ttrec_decode(raw, sizeof raw, &back, NULL), TTREC_OK);
    CHECK(rec_eq(&r, &back));
    CHECK_ST(ttrec_receive(raw, sizeof raw, TTREC_KIND_P2P, TTREC_RANK_MAX, UINT64_MAX, &back, NULL), TTREC_OK);
}

static void test_unknown_quality_normalised(void)
{
    ttrec_record r = example(), back;
    uint8_t raw[TTREC_LEN], again[TTREC_LEN];

    CHECK_ST(ttrec_encode(&r, raw), TTREC_OK);
    raw[TTREC_HEADER_OFF + 10] = TTEXT_Q_UNKNOWN; /* uncertainty 220 stays on the wire */
    recrc(raw);
    CHECK_ST(ttrec_decode(raw, sizeof raw, &back, NULL), TTREC_OK);
    CHECK(back.header.uncertainty_ns == 65535);
    CHECK_ST(ttrec_encode(&back, again), TTREC_OK);
    CHECK(again[TTREC_HEADER_OFF + 11] == 0xFF && again[TTREC_HEADER_OFF + 12] == 0xFF);
    CHECK(memcmp(again + TTREC_BODY_LEN, raw + TTREC_BODY_LEN, 4) != 0); /* a new CRC over the new octets */
}

static void test_checks_in_order(void)
{
    ttrec_record r = example(), out;
    uint8_t good[TTREC_LEN], raw[TTREC_LEN], zeros[TTREC_LEN + 1];
    ttext_status hs;
    size_t i;

    memset(zeros, 0, sizeof zeros);
    CHECK_ST(ttrec_encode(&r, good), TTREC_OK);
    CHECK_ST(ttrec_decode(NULL, 0, &out, NULL), TTREC_E_LENGTH);
    CHECK_ST(ttrec_decode(good, TTREC_LEN - 1, &out, NULL), TTREC_E_LENGTH);
    CHECK_ST(ttrec_decode(zeros, TTREC_LEN + 1, &out, NULL), TTREC_E_LENGTH);
    CHECK_ST(ttrec_decode(zeros, TTREC_LEN, &out, NULL), TTREC_E_ABSENT);
    zeros[TTREC_LEN - 1] = 1; /* not absent: version 0 comes before the CRC */
    CHECK_ST(ttrec_decode(zeros, TTREC_LEN, &out, NULL), TTREC_E_VERSION);
    memset(zeros, 0, sizeof zeros);
    recrc(zeros); /* octets 0..90 zero and their CRC: not absent either */
    CHECK_ST(ttrec_decode(zeros, TTREC_LEN, &out, NULL), TTREC_E_VERSION);

    /* Any single changed octet after the version fails the CRC; the version octet fails first. */
    for (i = 0; i < TTREC_LEN; i++) {
        memcpy(raw, good, sizeof raw);
        raw[i] ^= 0x10;
        CHECK_ST(ttrec_decode(raw, sizeof raw, &out, NULL), i == 0 ? TTREC_E_VERSION : TTREC_E_CHECKSUM);
    }

    memcpy(raw, good, sizeof raw);
    raw[1] = 2;
    CHECK_ST(ttrec_decode(raw, sizeof raw, &out, NULL), TTREC_E_CHECKSUM); /* CRC before kind */
    recrc(raw);
    CHECK_ST(ttrec_decode(raw, sizeof raw, &out, NULL), TTREC_E_KIND);
    raw[TTREC_HEADER_OFF + 9] = 3; /* and a bad header: the kind is checked first */
    recrc(raw);
    CHECK_ST(ttrec_decode(raw, sizeof raw, &out, NULL), TTREC_E_KIND);
    raw[1] = 1;
    recrc(raw);
    CHECK_ST(ttrec_decode(raw, sizeof raw, &out, &hs), TTREC_E_HEADER);
    CHECK(hs == TTEXT_E_TS_SOURCE);
    raw[TTREC_HEADER_OFF] = 0x02; /* header version 2 as well: the header's own order, VERSION first */
    recrc(raw);
    CHECK_ST(ttrec_decode(raw, sizeof raw, &out, &hs), TTREC_E_HEADER);
    CHECK(hs == TTEXT_E_VERSION);
    /* ... and the receiver's checks come after all of these: RECORD_HEADER, though the kind is unexpected. */
    CHECK_ST(ttrec_receive(raw, sizeof raw, TTREC_KIND_EXCHANGE, 3, 7, &out, &hs), TTREC_E_HEADER);
}

static void test_receiver_checks(void)
{
    ttrec_record r = example(), out;
    uint8_t raw[TTREC_LEN];

    CHECK_ST(ttrec_encode(&r, raw), TTREC_OK);
    CHECK_ST(ttrec_receive(raw, sizeof raw, TTREC_KIND_EXCHANGE, 3, 7, &out, NULL), TTREC_OK);
    CHECK_ST(ttrec_receive(raw, sizeof raw, TTREC_KIND_P2P, 3, 7, &out, NULL), TTREC_E_UNEXPECTED_KIND);
    CHECK_ST(ttrec_receive(raw, sizeof raw, TTREC_KIND_P2P, 4, 8, &out, NULL), TTREC_E_UNEXPECTED_KIND);
    CHECK_ST(ttrec_receive(raw, sizeof raw, TTREC_KIND_EXCHANGE, 4, 8, &out, NULL), TTREC_E_RANK);
    CHECK_ST(ttrec_receive(raw, sizeof raw, TTREC_KIND_EXCHANGE, 3, 8, &out, NULL), TTREC_E_SEQ);
    CHECK_ST(ttrec_receive(raw, sizeof raw, TTREC_KIND_EXCHANGE, 3, (UINT64_C(1) << 32) + 7, &out, NULL), TTREC_E_SEQ);
    CHECK_ST(ttrec_receive(raw, sizeof raw, TTREC_KIND_EXCHANGE, 3 + (UINT64_C(1) << 32), 7, &out, NULL), TTREC_E_RANK);
}

static void test_encode_refusals(void)
{
    ttrec_record r = example();
    uint8_t out[TTREC_LEN], before[TTREC_LEN];

    memset(out, 0xAB, sizeof out);
    memcpy(before, out, sizeof out);
    r.kind = 2;
    CHECK_ST(ttrec_encode(&r, out), TTREC_E_FIELD);
    r = example();
    r.rank = TTREC_RANK_MAX + 1;
    CHECK_ST(ttrec_encode(&r, out), TTREC_E_FIELD);
    r = example();
    r.header.tenant_id = 16;
    CHECK_ST(ttrec_encode(&r, out), TTREC_E_FIELD);
    r = example();
    r.header.lts = UINT64_MAX;
    CHECK_ST(ttrec_encode(&r, out), TTREC_E_FIELD);
    CHECK(memcmp(out, before, sizeof out) == 0); /* untouched on error */
    CHECK_ST(ttrec_encode(NULL, out), TTREC_E_ARGUMENT);
    CHECK_ST(ttrec_decode(out, sizeof out, NULL, NULL), TTREC_E_ARGUMENT);
}

static void test_names(void)
{
    static const char *const want[] = {"OK", "RECORD_LENGTH", "RECORD_ABSENT", "RECORD_VERSION", "RECORD_CHECKSUM",
                                       "RECORD_KIND", "RECORD_HEADER", "RECORD_UNEXPECTED_KIND", "RECORD_RANK", "RECORD_SEQ", "RECORD_FIELD",
                                       "ARGUMENT"};
    int i;
    for (i = 0; i <= (int)TTREC_E_ARGUMENT; i++)
        CHECK(strcmp(ttrec_status_name((ttrec_status)i), want[i]) == 0);
    CHECK(strcmp(ttrec_status_name((ttrec_status)(TTREC_E_ARGUMENT + 1)), "UNKNOWN_STATUS") == 0);
}

int main(void)
{
    test_crc32();
    test_layout_and_example();
    test_limits_round_trip();
    test_unknown_quality_normalised();
    test_checks_in_order();
    test_receiver_checks();
    test_encode_refusals();
    test_names();
    printf("test_record: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
