/* record.c -- the torch carried record: layout, CRC-32, checks in the spec's order (see record.h). */
#include "record.h"

#include <string.h>

/* Octet offsets of the layout (spec/torch.md section 3.1). */
enum {
    OFF_VERSION = 0,
    OFF_KIND = 1,
    OFF_RANK = 2,
    OFF_SEQ = 6,
    OFF_TRACE_ID = 14,
    OFF_SPAN_ID = 30,
    OFF_HEADER = TTREC_HEADER_OFF,
    OFF_CRC = TTREC_BODY_LEN
};

static const char *const status_names[] = {
    "OK",
    "RECORD_LENGTH",
    "RECORD_ABSENT",
    "RECORD_VERSION",
    "RECORD_CHECKSUM",
    "RECORD_KIND",
    "RECORD_HEADER",
    "RECORD_UNEXPECTED_KIND",
    "RECORD_RANK",
    "RECORD_SEQ",
    "RECORD_FIELD",
    "ARGUMENT",
};

const char *ttrec_status_name(ttrec_status status)
{
    size_t i = (size_t)status;
    if (i >= sizeof status_names / sizeof status_names[0])
        return "UNKNOWN_STATUS";
    return status_names[i];
}

/* Bit by bit: 91 octets per record, so a table buys nothing worth its 1 KiB. */
uint32_t ttrec_crc32(const uint8_t *buf, size_t len)
{
    uint32_t reg = UINT32_C(0xFFFFFFFF);
    size_t i;
    int bit;

    for (i = 0; i < len; i++) {
        reg ^= buf[i];
        for (bit = 0; bit < 8; bit++)
            reg = (reg & 1u) ? (reg >> 1) ^ UINT32_C(0xEDB88320) : reg >> 1;
    }
    return reg ^ UINT32_C(0xFFFFFFFF);
}

static uint64_t load_be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    int i;
    for (i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

static void store_be(uint8_t *p, uint64_t v, int n)
{
    int i;
    for (i = n - 1; i >= 0; i--) {
        p[i] = (uint8_t)(v & 0xFFu);
        v >>= 8;
    }
}

ttrec_status ttrec_encode(const ttrec_record *r, uint8_t out[TTREC_LEN])
{
    uint8_t raw[TTREC_LEN];

    if (r == NULL || out == NULL)
        return TTREC_E_ARGUMENT;
    if (r->kind > TTREC_KIND_P2P || r->rank > TTREC_RANK_MAX)
        return TTREC_E_FIELD;
    if (ttext_encode(&r->header, raw + OFF_HEADER) != TTEXT_OK)
        return TTREC_E_FIELD;
    raw[OFF_VERSION] = TTREC_VERSION;
    raw[OFF_KIND] = (uint8_t)r->kind;
    store_be(raw + OFF_RANK, r->rank, 4);
    store_be(raw + OFF_SEQ, r->seq, 8);
    memcpy(raw + OFF_TRACE_ID, r->trace_id, TTREC_TRACE_ID_LEN);
    memcpy(raw + OFF_SPAN_ID, r->span_id, TTREC_SPAN_ID_LEN);
    store_be(raw + OFF_CRC, ttrec_crc32(raw, TTREC_BODY_LEN), 4);
    memcpy(out, raw, TTREC_LEN);
    return TTREC_OK;
}

static int all_zero(const uint8_t *p, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (p[i] != 0)
            return 0;
    return 1;
}

ttrec_status ttrec_decode(const uint8_t *buf, size_t len, ttrec_record *out, ttext_status *header_status)
{
    ttrec_record r;
    ttext_status hs;

    if (header_status != NULL)
        *header_status = TTEXT_OK;
    if ((buf == NULL && len != 0) || out == NULL)
        return TTREC_E_ARGUMENT;
    if (len != TTREC_LEN)
        return TTREC_E_LENGTH;
    if (all_zero(buf, len))
        return TTREC_E_ABSENT;
    if (buf[OFF_VERSION] != TTREC_VERSION)
        return TTREC_E_VERSION;
    if (load_be(buf + OFF_CRC, 4) != ttrec_crc32(buf, TTREC_BODY_LEN))
        return TTREC_E_CHECKSUM;
    if (buf[OFF_KIND] > TTREC_KIND_P2P)
        return TTREC_E_KIND;
    hs = ttext_decode(buf + OFF_HEADER, TTEXT_WIRE_LEN, &r.header);
    if (hs != TTEXT_OK) {
        if (header_status != NULL)
            *header_status = hs;
        return TTREC_E_HEADER;
    }
    r.kind = buf[OFF_KIND];
    r.rank = load_be(buf + OFF_RANK, 4);
    r.seq = load_be(buf + OFF_SEQ, 8);
    memcpy(r.trace_id, buf + OFF_TRACE_ID, TTREC_TRACE_ID_LEN);
    memcpy(r.span_id, buf + OFF_SPAN_ID, TTREC_SPAN_ID_LEN);
    *out = r;
    return TTREC_OK;
}

ttrec_status ttrec_receive(const uint8_t *buf, size_t len, uint32_t expect_kind, uint64_t expect_rank,
                           uint64_t expect_seq, ttrec_record *out, ttext_status *header_status)
{
    ttrec_record r;
    ttrec_status st;

    if (out == NULL)
        return TTREC_E_ARGUMENT;
    st = ttrec_decode(buf, len, &r, header_status);
    if (st != TTREC_OK)
        return st;
    if (r.kind != expect_kind)
        return TTREC_E_UNEXPECTED_KIND;
    if (r.rank != expect_rank)
        return TTREC_E_RANK;
    if (r.seq != expect_seq)
        return TTREC_E_SEQ;
    *out = r;
    return TTREC_OK;
}
