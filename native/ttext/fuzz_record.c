/*
 * fuzz_record.c -- the record part of the fuzz pass (fuzz.c): mutated and
 * random records through record.h under ASan/UBSan, with the properties a
 * caller relies on: a decoded record re-encodes to its octets (an UNKNOWN
 * header's uncertainty aside), RECORD_HEADER comes with the header's own
 * status, and the receiver's checks add exactly kind, rank and seq, in that
 * order, to the codec's (spec/torch.md section 3.2).
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "record.h"

static seed record_seeds[MAX_SEEDS];
static size_t n_record_seeds;
static unsigned long record_outcomes[TTREC_E_ARGUMENT + 1];

void fuzz_record_add_seed(const unsigned char *p, size_t n)
{
    add_to(record_seeds, &n_record_seeds, p, n);
}

void fuzz_record_seed_from(const ttext_header *h)
{
    ttrec_record r;
    uint8_t rec[TTREC_LEN];
    size_t j;

    memset(&r, 0, sizeof r);
    r.kind = (uint32_t)below(2);
    r.rank = rnd() >> 32;
    r.seq = rnd();
    for (j = 0; j < TTREC_TRACE_ID_LEN; j++)
        r.trace_id[j] = (uint8_t)rnd();
    for (j = 0; j < TTREC_SPAN_ID_LEN; j++)
        r.span_id[j] = (uint8_t)rnd();
    r.header = *h;
    if (ttrec_encode(&r, rec) != TTREC_OK)
        VIOLATION("valid random record refused by the encoder");
    fuzz_record_add_seed(rec, sizeof rec);
}

/* Octets worth changing in a record: field edges, the header's among them (record.h layout). */
static const unsigned char record_spots[] = {0, 1, 2, 5, 6, 13, 14, 29, 30, 37, 38, 39, 46, 47, 48, 49, 50, 51, 90};

/* The generic mutations, or chosen octets changed with the CRC made right again,
 * so that the checks behind the CRC (kind, header) are reached. */
static size_t mutate_record(unsigned char *buf, size_t len)
{
    size_t k, n;
    uint32_t crc;
    if (len != TTREC_LEN || below(3) == 0)
        return mutate(buf, len);
    for (k = 0, n = 1 + below(3); k < n; k++)
        buf[record_spots[below(sizeof record_spots)]] = (unsigned char)(below(2) ? below(5) : rnd());
    if (below(10) != 0) {
        crc = ttrec_crc32(buf, TTREC_BODY_LEN);
        buf[91] = (unsigned char)(crc >> 24);
        buf[92] = (unsigned char)(crc >> 16);
        buf[93] = (unsigned char)(crc >> 8);
        buf[94] = (unsigned char)crc;
    }
    return len;
}

#define UNC_OFF (TTREC_HEADER_OFF + 11) /* the header's uncertainty_ns: 0xFFFF again when UNKNOWN */

static void one_record(const unsigned char *src, size_t len)
{
    unsigned char *buf = (unsigned char *)malloc(len ? len : 1); /* exact size, as in one_codec_input */
    uint8_t again[TTREC_LEN];
    ttrec_record r, r2;
    ttext_status hs, hs2;
    ttrec_status st;

    if (buf == NULL)
        exit(3);
    memcpy(buf, src, len);
    st = ttrec_decode(buf, len, &r, &hs);
    record_outcomes[st]++;
    if (strcmp(ttrec_status_name(st), "UNKNOWN_STATUS") == 0)
        VIOLATION("record status %d has no class name", (int)st);
    if ((st == TTREC_E_HEADER) != (hs != TTEXT_OK))
        VIOLATION("RECORD_HEADER without the header's status, or a header status without it");
    if (st == TTREC_E_HEADER && ttext_decode(buf + TTREC_HEADER_OFF, TTEXT_WIRE_LEN, &r2.header) != hs)
        VIOLATION("RECORD_HEADER names another status than ttext_decode() of the header");
    if (st != TTREC_OK) {
        /* The receiver's checks come after the codec's: the same answer, whatever it expects. */
        if (ttrec_receive(buf, len, (uint32_t)below(3), rnd() >> 32, rnd(), &r2, &hs2) != st || hs2 != hs)
            VIOLATION("receive and decode disagree on a refused record (%s)", ttrec_status_name(st));
    } else {
        if (ttrec_encode(&r, again) != TTREC_OK)
            VIOLATION("a decoded record does not re-encode");
        else if (memcmp(again, buf, UNC_OFF) != 0 ||
                 memcmp(again + UNC_OFF + 2, buf + UNC_OFF + 2, TTREC_BODY_LEN - UNC_OFF - 2) != 0 ||
                 (r.header.clk_quality != TTEXT_Q_UNKNOWN && memcmp(again, buf, TTREC_LEN) != 0))
            VIOLATION("a decoded record re-encodes to other octets");
        if (ttrec_receive(buf, len, r.kind, r.rank, r.seq, &r2, NULL) != TTREC_OK ||
            ttrec_receive(buf, len, r.kind ^ 1u, r.rank, r.seq, &r2, NULL) != TTREC_E_UNEXPECTED_KIND ||
            ttrec_receive(buf, len, r.kind, r.rank ^ 1u, r.seq ^ 1u, &r2, NULL) != TTREC_E_RANK ||
            ttrec_receive(buf, len, r.kind, r.rank, r.seq ^ (UINT64_C(1) << 63), &r2, NULL) != TTREC_E_SEQ)
            VIOLATION("the receiver's checks are not exactly kind, rank, seq in that order");
    }
    free(buf);
}

/* Mostly a mutated seed; sometimes noise of about the right length. */
void fuzz_record_one(void)
{
    unsigned char buf[MAX_INPUT];
    size_t len, j;

    if (n_record_seeds == 0 || below(8) == 0) {
        len = TTREC_LEN - 1 + below(3);
        for (j = 0; j < len; j++)
            buf[j] = (unsigned char)rnd();
    } else {
        const seed *s = &record_seeds[below(n_record_seeds)];
        memcpy(buf, s->data, s->len);
        len = mutate_record(buf, s->len);
    }
    one_record(buf, len);
}

void fuzz_record_report(void)
{
    int st;
    printf("fuzz: record outcomes:");
    for (st = 0; st <= (int)TTREC_E_ARGUMENT; st++)
        if (record_outcomes[st])
            printf(" %s=%lu", ttrec_status_name((ttrec_status)st), record_outcomes[st]);
    printf(" (%lu record seeds)\n", (unsigned long)n_record_seeds);
}
