/*
 * fuzz_stamps.c -- the stamps-text part of the fuzz pass (fuzz.c): mutated
 * texts and random valid stamps through stamps.h under ASan/UBSan, with the
 * properties a reader relies on: every status is a named class; a decoded
 * text encodes to a canonical text that decodes to the same values and
 * encodes to itself again; random valid values, OpenTelemetry times up to
 * 2^64-1 included, survive encode then decode unchanged
 * (spec/semantic-conventions.md section 1.4).
 */
#include <string.h>

#include "fuzz.h"
#include "stamps.h"

#define FUZZ_SENDS 64 /* sends of a random stamps value; a mutated seed holds at most MAX_INPUT / 2 */

static seed stamps_seeds[MAX_SEEDS];
static size_t n_stamps_seeds;
static unsigned long stamps_outcomes[TTST_E_CAPACITY + 1];

void fuzz_stamps_add_seed(const unsigned char *p, size_t n)
{
    add_to(stamps_seeds, &n_stamps_seeds, p, n);
}

/* OpenTelemetry times worth trying: mostly ordinary ones (the vectors' seeds are relative to those), the
 * ends of uint64, anything. */
static uint64_t otel_time(void)
{
    switch (below(8)) {
    case 0:
        return 0;
    case 1:
        return UINT64_MAX - below(3);
    case 2:
        return rnd();
    default:
        return UINT64_C(1700000000000000000) + below(10000000);
    }
}

static int64_t i63(void)
{
    return below(4) == 0 ? (int64_t)below(3) : (int64_t)(rnd() >> 1);
}

static void random_reading(ttst_reading *r)
{
    r->ptp_ns = i63();
    r->lts = i63();
    r->uncertainty_ns = below(3) == 0 ? TTST_UNCERTAINTY_MAX : (uint32_t)below(65536);
    r->clk_quality = (uint32_t)below(3);
}

static int same_reading(const ttst_reading *a, const ttst_reading *b)
{
    return a->ptp_ns == b->ptp_ns && a->uncertainty_ns == b->uncertainty_ns && a->clk_quality == b->clk_quality &&
           a->lts == b->lts;
}

static int same(const ttst_stamps *a, const ttst_stamps *b)
{
    size_t i;
    const ttst_received *x = &a->remote, *y = &b->remote;
    if (!same_reading(&a->start, &b->start) || a->ts_source != b->ts_source || a->has_end != b->has_end ||
        a->has_remote != b->has_remote || a->has_sketch != b->has_sketch || a->n_sends != b->n_sends)
        return 0;
    if (a->has_end && !same_reading(&a->end, &b->end))
        return 0;
    if (a->has_remote && (!same_reading(&x->header, &y->header) || x->ts_source != y->ts_source ||
                          x->tenant_id != y->tenant_id || x->merged != y->merged ||
                          (x->merged && x->recv_lts != y->recv_lts)))
        return 0;
    if (a->has_sketch && memcmp(a->sketch, b->sketch, TTST_SKETCH_BYTES) != 0)
        return 0;
    for (i = 0; i < a->n_sends; i++)
        if (!same_reading(&a->sends[i], &b->sends[i]))
            return 0;
    return 1;
}

/* Encode st, decode the text, compare; then the text must be its own canonical form. */
static void round_trip(const ttst_stamps *st, uint64_t start_ns, uint64_t end_ns, const char *what)
{
    static char text[16384], again[16384];
    static ttst_reading sends[FUZZ_SENDS + MAX_INPUT];
    ttst_stamps back;
    size_t len, len2;
    if (ttst_encode(st, start_ns, end_ns, text, sizeof text, &len) != TTST_OK) {
        VIOLATION("%s: valid stamps refused by the encoder", what);
        return;
    }
    if (ttst_decode(text, len, start_ns, end_ns, st->start.uncertainty_ns, st->start.clk_quality, &back, sends,
                    sizeof sends / sizeof sends[0]) != TTST_OK || !same(st, &back)) {
        VIOLATION("%s: encode then decode changed the values: %s", what, text);
        return;
    }
    if (ttst_encode(&back, start_ns, end_ns, again, sizeof again, &len2) != TTST_OK || len2 != len ||
        memcmp(text, again, len) != 0)
        VIOLATION("%s: the canonical text is not a fixed point: %s", what, text);
}

/* A random valid value: each optional part present or not, every field over its whole range. */
static void random_stamps(void)
{
    static ttst_reading sends[FUZZ_SENDS];
    ttst_stamps st;
    char text[16384];
    size_t i, len;
    memset(&st, 0, sizeof st);
    random_reading(&st.start);
    st.ts_source = (uint32_t)below(3);
    if ((st.has_end = below(2) != 0) != 0) {
        random_reading(&st.end);
        if (below(2))
            st.end.uncertainty_ns = st.start.uncertainty_ns, st.end.clk_quality = st.start.clk_quality;
    }
    if ((st.has_remote = below(2) != 0) != 0) {
        random_reading(&st.remote.header);
        st.remote.ts_source = (uint32_t)below(3);
        st.remote.tenant_id = (uint32_t)below(16);
        st.remote.merged = below(2) != 0;
        st.remote.recv_lts = i63();
    }
    if ((st.has_sketch = below(2) != 0) != 0)
        for (i = 0; i < TTST_SKETCH_BYTES; i++)
            st.sketch[i] = (uint8_t)rnd();
    st.sends = sends;
    st.n_sends = below(FUZZ_SENDS + 1);
    for (i = 0; i < st.n_sends; i++)
        random_reading(&sends[i]);
    round_trip(&st, otel_time(), otel_time(), "random stamps");
    if (n_stamps_seeds < MAX_SEEDS / 2 && ttst_encode(&st, otel_time(), otel_time(), text, sizeof text, &len) == TTST_OK &&
        len <= MAX_INPUT)
        fuzz_stamps_add_seed((const unsigned char *)text, len);
}

/* Pieces of the grammar worth inserting: separators, signs, tags, enum edges, the sketch alphabet's edges. */
static const char *const pieces[] = {" ", ",", "-", "-0", "0", "3", "9", "00", " x", " e", " r", " k", "s", "x",
                                     "99999999999999999999", "9223372036854775807", "65536", "16", "_", "8", "B"};

void fuzz_stamps_one(void)
{
    static ttst_reading sends[MAX_INPUT];
    unsigned char buf[MAX_INPUT];
    ttst_stamps st;
    size_t len;
    ttst_status status;
    uint64_t start_ns = otel_time(), end_ns = otel_time();

    if (n_stamps_seeds == 0 || below(4) == 0) {
        random_stamps();
        return;
    }
    {
        const seed *s = &stamps_seeds[below(n_stamps_seeds)];
        memcpy(buf, s->data, s->len);
        len = s->len;
    }
    if (below(2)) {
        const char *p = pieces[below(sizeof pieces / sizeof pieces[0])];
        size_t n = strlen(p), at = below(len + 1);
        if (len + n <= MAX_INPUT) {
            memmove(buf + at + n, buf + at, len - at);
            memcpy(buf + at, p, n);
            len += n;
        }
    } else {
        len = mutate(buf, len);
    }
    status = ttst_decode((const char *)buf, len, start_ns, end_ns, (uint32_t)below(65536), (uint32_t)below(3), &st,
                         sends, sizeof sends / sizeof sends[0]);
    if ((size_t)status > TTST_E_RANGE || strcmp(ttst_status_name(status), "UNKNOWN_STATUS") == 0)
        VIOLATION("stamps: status %d is not a text rule", (int)status);
    else
        stamps_outcomes[status]++;
    if (status == TTST_OK)
        round_trip(&st, start_ns, end_ns, "decoded text");
}

void fuzz_stamps_report(void)
{
    int s;
    printf("fuzz: stamps outcomes:");
    for (s = 0; s <= TTST_E_CAPACITY; s++)
        if (stamps_outcomes[s])
            printf(" %s=%lu", ttst_status_name((ttst_status)s), stamps_outcomes[s]);
    putchar('\n');
}
