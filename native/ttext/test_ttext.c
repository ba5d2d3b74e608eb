/*
 * test_ttext.c -- unit tests of the C codec that do not need the vector
 * files: MurmurHash3 known answers, round trips, every error class and its
 * precedence, the text-form rules, sketch and Lamport rules.  Exit status 0
 * when every check passes; each failure prints its line.
 */
#include <stdio.h>
#include <string.h>

#include "murmur3.h"
#include "ttext.h"
#include "test_check.h"

#define CHECK_ST(expr, want) CHECK_STATUS(ttext_status, ttext_status_name, expr, want)

static const char *B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* Known answers of MurmurHash3_x64_128 from the reference implementation. */
static void test_murmur3(void)
{
    static const struct {
        size_t len;
        uint32_t seed;
        uint64_t h1, h2;
    } kat[] = {
        {0, 0, UINT64_C(0x0000000000000000), UINT64_C(0x0000000000000000)},
        {8, 0, UINT64_C(0x47a7e1bdd68e2fc8), UINT64_C(0x60e6ee02ec31dcc7)},
        {15, 0, UINT64_C(0x47231598fd4925e9), UINT64_C(0xcd846dee88c67de9)},
        {16, 0, UINT64_C(0x444924b591903f30), UINT64_C(0xab906456762fe845)},
        {17, 0, UINT64_C(0x5c76f40f9fe7c20e), UINT64_C(0xc15f026b9edaa824)},
        {33, 0, UINT64_C(0x7d41281bfaba4612), UINT64_C(0x55ac8073a7d6a30b)},
    };
    uint8_t seq[64];
    uint64_t h[2];
    size_t i;

    for (i = 0; i < sizeof seq; i++)
        seq[i] = (uint8_t)i;
    for (i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        ttext_murmur3_x64_128(seq, kat[i].len, kat[i].seed, h);
        CHECK(h[0] == kat[i].h1 && h[1] == kat[i].h2);
    }
    ttext_murmur3_x64_128("hello", 5, 0, h);
    CHECK(h[0] == UINT64_C(0xcbd8a7b341bd9b02) && h[1] == UINT64_C(0x5b1e906a48ae1d19));
    ttext_murmur3_x64_128("hello", 5, 42, h);
    CHECK(h[0] == UINT64_C(0xc4b8b3c960af6f08) && h[1] == UINT64_C(0x2334b875b0efbc7a));
    ttext_murmur3_x64_128("a", 1, 0, h);
    CHECK(h[0] == UINT64_C(0x85555565f6597889) && h[1] == UINT64_C(0xe6b53a48510e895a));
}

static ttext_header sample(void)
{
    ttext_header h;
    memset(&h, 0, sizeof h);
    h.tenant_id = 15;
    h.ptp_ns = INT64_C(1700000037000000123);
    h.ts_source = TTEXT_SRC_GTE;
    h.clk_quality = TTEXT_Q_OK;
    h.uncertainty_ns = 220;
    h.lts = 42;
    h.svc_sketch[0] = 0x81;
    h.svc_sketch[31] = 0x01;
    return h;
}

/* Field-wise comparison (struct padding is unspecified). */
static int hdr_eq(const ttext_header *a, const ttext_header *b)
{
    return a->tenant_id == b->tenant_id && a->ptp_ns == b->ptp_ns && a->ts_source == b->ts_source &&
           a->clk_quality == b->clk_quality && a->uncertainty_ns == b->uncertainty_ns && a->lts == b->lts &&
           memcmp(a->svc_sketch, b->svc_sketch, TTEXT_SKETCH_BYTES) == 0;
}

static void test_binary(void)
{
    ttext_header h = sample(), d, bad;
    uint8_t raw[TTEXT_WIRE_LEN], mut[TTEXT_WIRE_LEN + 1];

    CHECK_ST(ttext_encode(&h, raw), TTEXT_OK);
    CHECK(raw[0] == 0xF3);
    CHECK(raw[11] == 0x00 && raw[12] == 220);
    CHECK(raw[20] == 42 && raw[13] == 0);
    CHECK(raw[21] == 0x81 && raw[52] == 0x01);
    CHECK_ST(ttext_decode(raw, sizeof raw, &d), TTEXT_OK);
    CHECK(hdr_eq(&d, &h));

    CHECK_ST(ttext_decode(raw, 0, &d), TTEXT_E_LENGTH);
    CHECK_ST(ttext_decode(raw, 52, &d), TTEXT_E_LENGTH);
    memcpy(mut, raw, sizeof raw);
    mut[53] = 0;
    CHECK_ST(ttext_decode(mut, 54, &d), TTEXT_E_LENGTH);
    CHECK_ST(ttext_decode(NULL, 0, &d), TTEXT_E_LENGTH);

    memcpy(mut, raw, sizeof raw);
    mut[0] = 0x02;
    CHECK_ST(ttext_decode(mut, 53, &d), TTEXT_E_VERSION);
    mut[1] = 0x80; /* negative ptp too, but version comes first */
    CHECK_ST(ttext_decode(mut, 53, &d), TTEXT_E_VERSION);
    mut[0] = 0x03;
    CHECK_ST(ttext_decode(mut, 53, &d), TTEXT_E_PTP_NS_RANGE);
    mut[9] = 3;
    CHECK_ST(ttext_decode(mut, 53, &d), TTEXT_E_PTP_NS_RANGE);
    mut[1] = 0x7F;
    CHECK_ST(ttext_decode(mut, 53, &d), TTEXT_E_TS_SOURCE);
    mut[9] = 2;
    mut[10] = 0xFF;
    mut[13] = 0x80;
    CHECK_ST(ttext_decode(mut, 53, &d), TTEXT_E_CLK_QUALITY);
    mut[10] = 2;
    CHECK_ST(ttext_decode(mut, 53, &d), TTEXT_E_LTS_RANGE);
    mut[13] = 0x7F;
    mut[11] = 0x00;
    mut[12] = 0x05;
    CHECK_ST(ttext_decode(mut, 53, &d), TTEXT_OK);
    CHECK(d.uncertainty_ns == 65535 && d.clk_quality == TTEXT_Q_UNKNOWN);
    CHECK(d.ptp_ns > 0 && (uint64_t)d.ptp_ns >> 56 == 0x7F);

    bad = h;
    bad.tenant_id = 16;
    bad.ptp_ns = -1;
    CHECK_ST(ttext_encode(&bad, raw), TTEXT_E_TENANT_ID);
    bad.tenant_id = 0;
    bad.ts_source = 3;
    CHECK_ST(ttext_encode(&bad, raw), TTEXT_E_PTP_NS_RANGE);
    bad.ptp_ns = 0;
    CHECK_ST(ttext_encode(&bad, raw), TTEXT_E_TS_SOURCE);
    bad.ts_source = 2;
    bad.clk_quality = 3;
    CHECK_ST(ttext_encode(&bad, raw), TTEXT_E_CLK_QUALITY);
    bad.clk_quality = 2;
    bad.uncertainty_ns = 65536;
    bad.lts = UINT64_C(1) << 63;
    CHECK_ST(ttext_encode(&bad, raw), TTEXT_E_UNCERTAINTY_RANGE);
    bad.uncertainty_ns = 7;
    CHECK_ST(ttext_encode(&bad, raw), TTEXT_E_LTS_RANGE);
    bad.lts = TTEXT_LTS_MAX;
    CHECK_ST(ttext_encode(&bad, raw), TTEXT_OK);
    CHECK(raw[11] == 0xFF && raw[12] == 0xFF); /* UNKNOWN writes 0xFFFF */
    CHECK(raw[0] == 0x03);
}

static void test_text(void)
{
    ttext_header h = sample(), d;
    char text[TTEXT_TEXT_BUF], buf[400];
    uint8_t raw[TTEXT_WIRE_LEN];
    size_t i;

    CHECK_ST(ttext_to_text(&h, text), TTEXT_OK);
    CHECK(strlen(text) == 71);
    CHECK(strspn(text, B64) == 71);
    CHECK_ST(ttext_from_text(text, 71, &d), TTEXT_OK);
    CHECK(hdr_eq(&d, &h));
    /* Not NUL-terminated: the decoder must use len only. */
    memcpy(buf, text, 71);
    memset(buf + 71, 'A', 10);
    CHECK_ST(ttext_from_text(buf, 71, &d), TTEXT_OK);
    CHECK_ST(ttext_from_text(buf, 72, &d), TTEXT_E_TEXT_LENGTH);
    CHECK_ST(ttext_from_text(buf, 70, &d), TTEXT_E_TEXT_LENGTH);
    CHECK_ST(ttext_from_text(buf, 0, &d), TTEXT_E_TEXT_LENGTH);
    /* NULL with length 0 is an empty value, not a pointer to scan. */
    CHECK_ST(ttext_from_text(NULL, 0, &d), TTEXT_E_TEXT_LENGTH);
    CHECK_ST(ttext_from_text("  \t ", 4, &d), TTEXT_E_TEXT_LENGTH);

    /* OWS stripping. */
    sprintf(buf, " \t%s\t ", text);
    CHECK_ST(ttext_from_text(buf, strlen(buf), &d), TTEXT_OK);
    sprintf(buf, "\n%s", text);
    CHECK_ST(ttext_from_text(buf, strlen(buf), &d), TTEXT_E_TEXT_ALPHABET);
    sprintf(buf, "%.35s %s", text, text + 35);
    CHECK_ST(ttext_from_text(buf, strlen(buf), &d), TTEXT_E_TEXT_ALPHABET);

    /* Multiple beats padding beats alphabet beats length. */
    sprintf(buf, "%s,%s", text, text);
    CHECK_ST(ttext_from_text(buf, strlen(buf), &d), TTEXT_E_TEXT_MULTIPLE);
    sprintf(buf, "%s= ,", text);
    CHECK_ST(ttext_from_text(buf, strlen(buf), &d), TTEXT_E_TEXT_MULTIPLE);
    sprintf(buf, "+%s=", text);
    CHECK_ST(ttext_from_text(buf, strlen(buf), &d), TTEXT_E_TEXT_PADDING);
    sprintf(buf, "%.70s+", text);
    CHECK_ST(ttext_from_text(buf, strlen(buf), &d), TTEXT_E_TEXT_ALPHABET);
    sprintf(buf, "%.70s/", text);
    CHECK_ST(ttext_from_text(buf, strlen(buf), &d), TTEXT_E_TEXT_ALPHABET);
    sprintf(buf, "%.69s\xc3\xa9", text); /* 71 characters, one non-ASCII */
    CHECK_ST(ttext_from_text(buf, strlen(buf), &d), TTEXT_E_TEXT_ALPHABET);

    /* Non-canonical: last character with a low bit set. */
    memcpy(buf, text, 71);
    buf[70] = B64[(strchr(B64, text[70]) - B64) | 1];
    CHECK_ST(ttext_from_text(buf, 71, &d), TTEXT_E_TEXT_NON_CANONICAL);
    buf[70] = B64[(strchr(B64, text[70]) - B64) | 2];
    CHECK_ST(ttext_from_text(buf, 71, &d), TTEXT_E_TEXT_NON_CANONICAL);

    /* The input cap counts octets as received, before stripping. */
    memset(buf, ' ', 300);
    memcpy(buf + 100, text, 71);
    CHECK_ST(ttext_from_text(buf, 256, &d), TTEXT_OK);
    CHECK_ST(ttext_from_text(buf, 257, &d), TTEXT_E_TEXT_LENGTH);
    /* Two-octet characters: 128 of them are 256 octets, so the alphabet rule
     * rejects them; 129 (and 200) are over the cap whatever the characters. */
    for (i = 0; i < 200; i++) {
        buf[2 * i] = (char)0xC3;
        buf[2 * i + 1] = (char)0xA9;
    }
    CHECK_ST(ttext_from_text(buf, 2 * 128, &d), TTEXT_E_TEXT_ALPHABET);
    CHECK_ST(ttext_from_text(buf, 2 * 128 + 1, &d), TTEXT_E_TEXT_LENGTH);
    CHECK_ST(ttext_from_text(buf, 2 * 200, &d), TTEXT_E_TEXT_LENGTH);
    /* Octets that are not UTF-8 at all (a Latin-1 server's bytes) count one each. */
    memset(buf, 0xE9, 257);
    CHECK_ST(ttext_from_text(buf, 256, &d), TTEXT_E_TEXT_ALPHABET);
    CHECK_ST(ttext_from_text(buf, 257, &d), TTEXT_E_TEXT_LENGTH);
    CHECK_ST(ttext_text_to_bytes(buf, 0, raw), TTEXT_E_TEXT_LENGTH);

    /* A well-formed text whose bytes break a wire rule gets the wire error:
     * "AA" as the first two characters makes byte 0 zero (version 0). */
    memcpy(buf, text, 71);
    buf[0] = 'A';
    buf[1] = 'A';
    CHECK_ST(ttext_text_to_bytes(buf, 71, raw), TTEXT_OK);
    CHECK(raw[0] == 0);
    CHECK_ST(ttext_from_text(buf, 71, &d), TTEXT_E_VERSION);
}

/* The worked example of spec/tt-ext-v3.md section 8.5, end to end. */
static void test_spec_worked_example(void)
{
    static const uint8_t span[TTEXT_SPAN_ID_LEN] = {1, 2, 3, 4, 5, 6, 7, 8};
    static const char want_text[] = "AxeXnQbTiTJ7AAAA3AAAAAAAAAAqAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAACBAgQAA";
    ttext_header h;
    unsigned idx[TTEXT_SKETCH_K];
    uint64_t hash[2];
    char text[TTEXT_TEXT_BUF];

    ttext_murmur3_x64_128(span, sizeof span, 0, hash);
    CHECK(hash[0] == UINT64_C(11306300771342204892) && hash[1] == UINT64_C(14224590727137307655));
    ttext_sketch_indices(span, idx);
    CHECK(idx[0] == 220 && idx[1] == 227 && idx[2] == 234 && idx[3] == 241);
    memset(&h, 0, sizeof h);
    ttext_sketch_add(h.svc_sketch, span);
    CHECK(h.svc_sketch[27] == 0x08 && h.svc_sketch[28] == 0x10 && h.svc_sketch[29] == 0x20 &&
          h.svc_sketch[30] == 0x40 && ttext_sketch_popcount(h.svc_sketch) == 4);
    h.ptp_ns = INT64_C(1700000037000000123);
    h.uncertainty_ns = 220;
    h.lts = 42;
    CHECK_ST(ttext_to_text(&h, text), TTEXT_OK);
    CHECK(strcmp(text, want_text) == 0);
}

static void test_sketch(void)
{
    uint8_t s[TTEXT_SKETCH_BYTES], t[TTEXT_SKETCH_BYTES];
    uint8_t id[TTEXT_SPAN_ID_LEN] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint8_t other[TTEXT_SPAN_ID_LEN] = {8, 7, 6, 5, 4, 3, 2, 1};
    unsigned idx[TTEXT_SKETCH_K], idx2[TTEXT_SKETCH_K], i;
    uint64_t h[2];

    memset(s, 0, sizeof s);
    CHECK(ttext_sketch_popcount(s) == 0);
    CHECK(ttext_sketch_fp_rate(s) == 0.0);
    CHECK(!ttext_sketch_contains(s, id));
    ttext_sketch_add(s, id);
    CHECK(ttext_sketch_contains(s, id));
    CHECK(ttext_sketch_popcount(s) >= 1 && ttext_sketch_popcount(s) <= 4);

    ttext_sketch_indices(id, idx);
    ttext_sketch_indices_u64(UINT64_C(0x0102030405060708), idx2);
    CHECK(memcmp(idx, idx2, sizeof idx) == 0);
    CHECK_ST(ttext_sketch_indices_n(id, 8, idx2), TTEXT_OK);
    CHECK(memcmp(idx, idx2, sizeof idx) == 0);
    CHECK_ST(ttext_sketch_indices_n(id, 7, idx2), TTEXT_E_SPAN_ID);
    CHECK_ST(ttext_sketch_indices_n(NULL, 0, idx2), TTEXT_E_SPAN_ID);
    ttext_murmur3_x64_128(id, 8, 0, h);
    for (i = 0; i < TTEXT_SKETCH_K; i++) {
        CHECK(idx[i] == (unsigned)((h[0] + i * h[1]) & 0xFFu));
        CHECK(s[idx[i] / 8] & (0x80u >> (idx[i] % 8)));
    }

    memset(t, 0, sizeof t);
    ttext_sketch_add(t, other);
    ttext_sketch_merge(t, s);
    CHECK(ttext_sketch_contains(t, id) && ttext_sketch_contains(t, other));
    memset(s, 0xFF, sizeof s);
    CHECK(ttext_sketch_popcount(s) == 256);
    CHECK(ttext_sketch_fp_rate(s) == 1.0);
    CHECK(ttext_sketch_contains(s, other));
}

static void test_lamport(void)
{
    ttext_lamport c = {0, 0};
    int merged = -1;

    CHECK_ST(ttext_lamport_init(&c, UINT64_C(1) << 63), TTEXT_E_LTS_RANGE);
    CHECK_ST(ttext_lamport_init(&c, 0), TTEXT_OK);
    CHECK(ttext_lamport_tick(&c) == 0 && c.value == 1);
    CHECK_ST(ttext_lamport_merge(&c, 10), TTEXT_OK);
    CHECK(c.value == 11);
    CHECK_ST(ttext_lamport_merge(&c, 3), TTEXT_OK);
    CHECK(c.value == 12);
    CHECK_ST(ttext_lamport_merge(&c, UINT64_C(1) << 63), TTEXT_E_LTS_RANGE);
    CHECK(c.value == 12 && !c.saturated);
    CHECK_ST(ttext_lamport_merge(&c, UINT64_MAX), TTEXT_E_LTS_RANGE);
    CHECK(c.value == 12);
    /* Reaching the ceiling exactly is not saturation; going past it is. */
    CHECK_ST(ttext_lamport_init(&c, TTEXT_LTS_MAX - 10), TTEXT_OK);
    CHECK_ST(ttext_lamport_merge(&c, TTEXT_LTS_MAX - 1), TTEXT_OK);
    CHECK(c.value == TTEXT_LTS_MAX && !c.saturated);
    CHECK(ttext_lamport_tick(&c) == 1 && c.value == TTEXT_LTS_MAX && c.saturated);
    CHECK_ST(ttext_lamport_merge(&c, UINT64_C(1) << 63), TTEXT_E_LTS_RANGE);
    CHECK(c.value == TTEXT_LTS_MAX && c.saturated);
    /* A saturated remote from a fresh counter is far over the bound: not merged. */
    CHECK_ST(ttext_lamport_init(&c, 0), TTEXT_OK);
    CHECK_ST(ttext_lamport_receive(&c, TTEXT_LTS_MAX, &merged), TTEXT_OK);
    CHECK(c.value == 1 && !merged && !c.saturated);
    CHECK_ST(ttext_lamport_merge(&c, TTEXT_LTS_MAX), TTEXT_OK);
    CHECK(c.value == 2 && !c.saturated);
    /* Exactly TTEXT_LAMPORT_MAX_AHEAD ahead is merged; one more is not. */
    CHECK_ST(ttext_lamport_init(&c, 1000), TTEXT_OK);
    CHECK_ST(ttext_lamport_receive(&c, 1001 + TTEXT_LAMPORT_MAX_AHEAD, &merged), TTEXT_OK);
    CHECK(c.value == 1001 && !merged);
    CHECK_ST(ttext_lamport_receive(&c, 1001 + TTEXT_LAMPORT_MAX_AHEAD, &merged), TTEXT_OK);
    CHECK(c.value == 1002 + TTEXT_LAMPORT_MAX_AHEAD && merged);
    /* A remote behind the counter is merged (max keeps the local value). */
    CHECK_ST(ttext_lamport_receive(&c, 3, &merged), TTEXT_OK);
    CHECK(c.value == 1003 + TTEXT_LAMPORT_MAX_AHEAD && merged);
    /* A refused (out-of-range) remote leaves the flag alone. */
    merged = 7;
    CHECK_ST(ttext_lamport_receive(&c, UINT64_C(1) << 63, &merged), TTEXT_E_LTS_RANGE);
    CHECK(merged == 7 && c.value == 1003 + TTEXT_LAMPORT_MAX_AHEAD);
    /* Within the bound, merging 2^63-1 saturates. */
    CHECK_ST(ttext_lamport_init(&c, TTEXT_LTS_MAX - TTEXT_LAMPORT_MAX_AHEAD), TTEXT_OK);
    CHECK_ST(ttext_lamport_receive(&c, TTEXT_LTS_MAX, &merged), TTEXT_OK);
    CHECK(c.value == TTEXT_LTS_MAX && merged && c.saturated);
    CHECK_ST(ttext_lamport_receive(NULL, 1, &merged), TTEXT_E_ARGUMENT);
}

static void test_names(void)
{
    CHECK(strcmp(ttext_status_name(TTEXT_OK), "OK") == 0);
    CHECK(strcmp(ttext_status_name(TTEXT_E_LTS_RANGE), "LTS_RANGE") == 0);
    CHECK(strcmp(ttext_status_name(TTEXT_E_TEXT_NON_CANONICAL), "TEXT_NON_CANONICAL") == 0);
    CHECK(strcmp(ttext_status_name(TTEXT_E_ARGUMENT), "ARGUMENT") == 0);
    CHECK(strcmp(ttext_status_name(TTEXT_E_SPAN_ID), "SPAN_ID") == 0);
    CHECK(strcmp(ttext_status_name((ttext_status)999), "UNKNOWN_STATUS") == 0);
}

int main(void)
{
    test_murmur3();
    test_binary();
    test_text();
    test_spec_worked_example();
    test_sketch();
    test_lamport();
    test_names();
    printf("test_ttext: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
