/*
 * adapter_stamps.c -- the decode_stamps and encode_stamps ops of the C
 * adapter (conformance/PROTOCOL.md), answered through stamps.c.  The text is
 * copied into a heap buffer of exactly its length, so an AddressSanitizer
 * build catches any read past the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapter.h"
#include "stamps.h"

static const char *const READING_KEYS[] = {"PtpNs", "UncertaintyNs", "ClkQuality", "Lts"};

/* A decimal field that must fit lo..hi (the protocol sends valid values here); else problem. */
static int64_t dec(const jl_str *s, int64_t lo, uint64_t hi)
{
    int neg, ovf;
    uint64_t m;
    if (s == NULL || parse_dec(s, &neg, &m, &ovf) != 0)
        return 0;
    if (ovf || (neg && (lo >= 0 || m > (uint64_t)INT64_MAX)) || (!neg && m > hi)) {
        problem = "integer outside the range this op takes";
        return 0;
    }
    return neg ? -(int64_t)m : (int64_t)m;
}

static uint64_t u64_field(const jl_object *req, const char *k)
{
    const jl_str *s = get_str(req, k);
    int neg, ovf;
    uint64_t m = 0;
    if (s != NULL && parse_dec(s, &neg, &m, &ovf) == 0 && (ovf || (neg && m != 0)))
        problem = "an OpenTelemetry time is 0..2^64-1";
    return m;
}

/* A plain attribute (uncertaintyNs, clkQuality): any decimal; one no uint32 holds (negative, too large)
 * becomes UINT32_MAX, which the codec refuses as out of range like any other value above the field's. */
static uint32_t plain(const jl_str *s)
{
    int neg, ovf;
    uint64_t m = 0;
    if (s == NULL || parse_dec(s, &neg, &m, &ovf) != 0)
        return 0;
    return (neg && m != 0) || ovf || m > UINT32_MAX ? UINT32_MAX : (uint32_t)m;
}

static void put_i64(const char *k, int64_t v)
{
    char buf[24];
    sprintf(buf, "%lld", (long long)v);
    put_str(k, buf);
}

static void put_reading(const char *prefix, const ttst_reading *r)
{
    char name[32];
    int64_t values[4];
    size_t i;
    values[0] = r->ptp_ns;
    values[1] = r->uncertainty_ns;
    values[2] = r->clk_quality;
    values[3] = r->lts;
    for (i = 0; i < 4; i++) {
        sprintf(name, "%s%s", prefix, READING_KEYS[i]);
        put_i64(name, values[i]);
    }
}

static void get_reading(const jl_object *req, const char *prefix, ttst_reading *r)
{
    char name[32];
    sprintf(name, "%sPtpNs", prefix);
    r->ptp_ns = dec(get_str(req, name), 0, INT64_MAX);
    sprintf(name, "%sUncertaintyNs", prefix);
    r->uncertainty_ns = (uint32_t)dec(get_str(req, name), 0, TTST_UNCERTAINTY_MAX);
    sprintf(name, "%sClkQuality", prefix);
    r->clk_quality = (uint32_t)dec(get_str(req, name), 0, 2);
    sprintf(name, "%sLts", prefix);
    r->lts = dec(get_str(req, name), 0, INT64_MAX);
}

static int flag(const jl_object *req, const char *k)
{
    const jl_str *s = get_str(req, k);
    if (s != NULL && s->len == 4 && memcmp(s->ptr, "true", 4) == 0)
        return 1;
    if (s != NULL && !(s->len == 5 && memcmp(s->ptr, "false", 5) == 0))
        problem = "a flag is true or false";
    return 0;
}

static void put_sends(const ttst_stamps *st)
{
    char name[32];
    size_t i, j;
    for (j = 0; j < 4; j++) {
        sprintf(name, "send%s", READING_KEYS[j]);
        key(name);
        fputc('[', stdout);
        for (i = 0; i < st->n_sends; i++) {
            const ttst_reading *x = &st->sends[i];
            int64_t v = j == 0 ? x->ptp_ns : j == 1 ? x->uncertainty_ns : j == 2 ? x->clk_quality : x->lts;
            char buf[24];
            sprintf(buf, "%lld", (long long)v);
            if (i)
                fputc(',', stdout);
            jl_write_string(stdout, buf, strlen(buf));
        }
        fputc(']', stdout);
    }
}

static void reply(const jl_object *req, const ttst_stamps *st, const char *canonical)
{
    static const char hex[] = "0123456789abcdef";
    char sketch[2 * TTST_SKETCH_BYTES + 1] = "";
    size_t i;
    begin(req);
    put_i64("tsSource", st->ts_source);
    put_reading("start", &st->start);
    put_str("end", st->has_end ? "true" : "false");
    if (st->has_end)
        put_reading("end", &st->end);
    put_str("receive", st->has_remote ? "true" : "false");
    if (st->has_remote) {
        put_reading("remote", &st->remote.header);
        put_i64("remoteTsSource", st->remote.ts_source);
        put_i64("remoteTenantId", st->remote.tenant_id);
    }
    /* Absent values are absent keys, as end* and remote* are (PROTOCOL.md, one convention). */
    if (st->has_remote && st->remote.merged)
        put_i64("recvLts", st->remote.recv_lts);
    for (i = 0; st->has_sketch && i < TTST_SKETCH_BYTES; i++) {
        sketch[2 * i] = hex[st->sketch[i] >> 4];
        sketch[2 * i + 1] = hex[st->sketch[i] & 15];
    }
    if (st->has_sketch)
        put_str("sketch", sketch);
    put_sends(st);
    put_str("canonical", canonical);
    end();
}

void op_decode_stamps(const jl_object *req)
{
    const jl_str *text = get_str(req, "text");
    uint64_t start_ns = u64_field(req, "startTimeUnixNano"), end_ns = u64_field(req, "endTimeUnixNano");
    const jl_field *unc = jl_get(req, "uncertaintyNs"), *qual = jl_get(req, "clkQuality");
    uint32_t u = TTST_UNCERTAINTY_MAX, q = TTST_QUALITY_UNKNOWN; /* absent: not on the span */
    size_t cap, len;
    ttst_reading *sends;
    ttst_stamps st;
    ttst_status status;
    char *copy, *canonical;

    if (unc != NULL)
        u = plain(get_str(req, "uncertaintyNs"));
    if (qual != NULL)
        q = plain(get_str(req, "clkQuality"));
    if (text == NULL || problem != NULL)
        return;
    cap = ttst_count_sends(text->ptr, text->len);
    cap = cap > TTST_MAX_SENDS ? TTST_MAX_SENDS : cap;
    copy = (char *)malloc(text->len ? text->len : 1);
    sends = (ttst_reading *)malloc((cap ? cap : 1) * sizeof *sends);
    canonical = (char *)malloc(ttst_encoded_max(cap));
    if (copy == NULL || sends == NULL || canonical == NULL) {
        problem = "out of memory";
    } else {
        memcpy(copy, text->ptr, text->len);
        status = ttst_decode(copy, text->len, start_ns, end_ns, u, q, &st, sends, cap);
        if (status == TTST_OK && ttst_encode(&st, start_ns, end_ns, canonical, ttst_encoded_max(cap), &len) != TTST_OK)
            problem = "decoded stamps do not encode"; /* cannot happen: ttst_encoded_max() suffices */
        else if (status == TTST_OK)
            reply(req, &st, canonical);
        else if (status == TTST_E_CAPACITY)
            problem = "more sends than counted"; /* cannot happen: each send token begins with SP x */
        else {
            begin(req);
            put_str("errorClass", ttst_status_name(status));
            end();
        }
    }
    free(copy);
    free(sends);
    free(canonical);
}

void op_encode_stamps(const jl_object *req)
{
    const jl_field *cols[4];
    ttst_stamps st;
    ttst_reading *sends = NULL;
    char *out = NULL;
    size_t i, n = 0, len;
    const jl_str *sk;

    memset(&st, 0, sizeof st);
    for (i = 0; i < 4; i++) {
        char name[32];
        sprintf(name, "send%s", READING_KEYS[i]);
        if ((cols[i] = get_list(req, name)) == NULL)
            return;
        if (i > 0 && cols[i]->n_items != n)
            problem = "the send arrays must have one entry per send";
        n = cols[i]->n_items;
    }
    get_reading(req, "start", &st.start);
    st.ts_source = (uint32_t)dec(get_str(req, "tsSource"), 0, 2);
    if ((st.has_end = flag(req, "end")) != 0)
        get_reading(req, "end", &st.end);
    if ((st.has_remote = flag(req, "receive")) != 0) {
        get_reading(req, "remote", &st.remote.header);
        st.remote.ts_source = (uint32_t)dec(get_str(req, "remoteTsSource"), 0, 2);
        st.remote.tenant_id = (uint32_t)dec(get_str(req, "remoteTenantId"), 0, TTST_TENANT_MAX);
        st.remote.merged = jl_get(req, "recvLts") != NULL; /* absent: not merged */
        if (st.remote.merged)
            st.remote.recv_lts = dec(get_str(req, "recvLts"), 0, INT64_MAX);
    }
    sk = jl_get(req, "sketch") != NULL ? get_str(req, "sketch") : NULL; /* absent: no sketch */
    if (sk != NULL) {
        uint8_t *raw = from_hex(sk, &len);
        if (raw != NULL && len == TTST_SKETCH_BYTES)
            memcpy(st.sketch, raw, TTST_SKETCH_BYTES);
        else if (raw != NULL)
            problem = "a sketch is 32 octets";
        free(raw);
        st.has_sketch = 1;
    }
    if (problem != NULL || (sends = (ttst_reading *)malloc((n ? n : 1) * sizeof *sends)) == NULL ||
        (out = (char *)malloc(ttst_encoded_max(n))) == NULL) {
        if (problem == NULL)
            problem = "out of memory";
        free(sends);
        return;
    }
    for (i = 0; i < n && problem == NULL; i++) {
        sends[i].ptp_ns = dec(&cols[0]->items[i], 0, INT64_MAX);
        sends[i].uncertainty_ns = (uint32_t)dec(&cols[1]->items[i], 0, TTST_UNCERTAINTY_MAX);
        sends[i].clk_quality = (uint32_t)dec(&cols[2]->items[i], 0, 2);
        sends[i].lts = dec(&cols[3]->items[i], 0, INT64_MAX);
    }
    st.sends = sends;
    st.n_sends = n;
    if (problem == NULL) {
        uint64_t start_ns = u64_field(req, "startTimeUnixNano"), end_ns = u64_field(req, "endTimeUnixNano");
        if (problem == NULL && ttst_encode(&st, start_ns, end_ns, out, ttst_encoded_max(n), &len) != TTST_OK)
            problem = "the text does not fit ttst_encoded_max()";
        if (problem == NULL) {
            begin(req);
            put_str("text", out);
            end();
        }
    }
    free(sends);
    free(out);
}
