/*
 * adapter.c -- conformance adapter for the C codec.
 *
 * Speaks conformance/PROTOCOL.md on stdin/stdout: one flat JSON request per
 * line, one JSON response per line, until EOF.  All logic that decides a
 * vector's outcome lives in ttext.c; this file only converts between the
 * protocol's strings and the C API.  Every wire or text input is copied into
 * a heap buffer of exactly its length, so an AddressSanitizer build catches
 * any read past the end.  The record ops (spec/torch.md section 3) answer
 * through record.c, the stamps ops through adapter_stamps.c (stamps.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapter.h"
#include "jsonline.h"
#include "murmur3.h"
#include "record.h"
#include "ttext.h"

#define MAX_LINE (16u * 1024u * 1024u) /* refuse absurd requests instead of growing forever */

/* ---- response writer ---------------------------------------------------- */

static int first_field;

void begin(const jl_object *req)
{
    const jl_field *id = jl_get(req, "id");
    first_field = 1;
    fputc('{', stdout);
    if (id != NULL && !id->is_array) {
        jl_write_string(stdout, "id", 2);
        fputc(':', stdout);
        jl_write_string(stdout, id->value.ptr, id->value.len);
        first_field = 0;
    }
}

void key(const char *k)
{
    if (!first_field)
        fputc(',', stdout);
    first_field = 0;
    jl_write_string(stdout, k, strlen(k));
    fputc(':', stdout);
}

void put_str(const char *k, const char *v)
{
    key(k);
    jl_write_string(stdout, v, strlen(v));
}

static void put_u64(const char *k, unsigned long long v)
{
    char buf[32];
    sprintf(buf, "%llu", v);
    put_str(k, buf);
}

static void put_hex(const char *k, const uint8_t *p, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    size_t i;
    key(k);
    fputc('"', stdout);
    for (i = 0; i < n; i++) {
        fputc(digits[p[i] >> 4], stdout);
        fputc(digits[p[i] & 15], stdout);
    }
    fputc('"', stdout);
}

void end(void)
{
    fputs("}\n", stdout);
    fflush(stdout);
}

/* ---- request field access ----------------------------------------------- */

/* The protocol problem of the current request (first one wins). */
const char *problem;

const jl_str *get_str(const jl_object *req, const char *k)
{
    const jl_field *f = jl_get(req, k);
    if (f == NULL || f->is_array) {
        if (problem == NULL)
            problem = "missing or non-string field";
        return NULL;
    }
    return &f->value;
}

const jl_field *get_list(const jl_object *req, const char *k)
{
    const jl_field *f = jl_get(req, k);
    if (f == NULL || !f->is_array) {
        if (problem == NULL)
            problem = "missing or non-array field";
        return NULL;
    }
    return f;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decode hex into a fresh buffer of exactly the decoded length (malloc(1)
 * for zero bytes so the pointer is valid).  NULL plus problem on bad hex. */
uint8_t *from_hex(const jl_str *s, size_t *n)
{
    uint8_t *out;
    size_t i;
    if (s->len % 2 != 0) {
        problem = "odd-length hex";
        return NULL;
    }
    *n = s->len / 2;
    out = (uint8_t *)malloc(*n ? *n : 1);
    if (out == NULL) {
        problem = "out of memory";
        return NULL;
    }
    for (i = 0; i < *n; i++) {
        int hi = hex_digit(s->ptr[2 * i]), lo = hex_digit(s->ptr[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(out);
            problem = "bad hex digit";
            return NULL;
        }
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return out;
}

/* Hex of exactly want bytes into out. */
static int fixed_hex(const jl_str *s, uint8_t *out, size_t want)
{
    size_t n;
    uint8_t *raw = from_hex(s, &n);
    if (raw == NULL)
        return -1;
    if (n != want) {
        free(raw);
        problem = "hex value has the wrong length";
        return -1;
    }
    memcpy(out, raw, n);
    free(raw);
    return 0;
}

/*
 * A decimal integer string -> sign and magnitude; *overflow when |v| >= 2^64.
 * Values the C types cannot hold are still meaningful to the protocol (an
 * encoder must refuse them), so callers map them onto an equally invalid value.
 */
int parse_dec(const jl_str *s, int *negative, uint64_t *mag, int *overflow)
{
    size_t i = 0;
    *negative = 0;
    *mag = 0;
    *overflow = 0;
    if (s->len > 0 && s->ptr[0] == '-') {
        *negative = 1;
        i = 1;
    }
    if (i == s->len) {
        problem = "empty integer";
        return -1;
    }
    for (; i < s->len; i++) {
        unsigned d;
        if (s->ptr[i] < '0' || s->ptr[i] > '9') {
            problem = "bad decimal integer";
            return -1;
        }
        d = (unsigned)(s->ptr[i] - '0');
        if (*mag > (UINT64_MAX - d) / 10)
            *overflow = 1;
        else
            *mag = *mag * 10 + d;
    }
    return 0;
}

/* Unsigned field wider than any valid value: out-of-type values (negative,
 * too large) become UINT32_MAX / UINT64_MAX, which fail the same range rule. */
static int get_u32(const jl_object *req, const char *k, uint32_t *v)
{
    const jl_str *s = get_str(req, k);
    int neg, ovf;
    uint64_t m;
    if (s == NULL || parse_dec(s, &neg, &m, &ovf) != 0)
        return -1;
    *v = (neg && m != 0) || ovf || m > UINT32_MAX ? UINT32_MAX : (uint32_t)m;
    return 0;
}

static int get_u64(const jl_object *req, const char *k, uint64_t *v)
{
    const jl_str *s = get_str(req, k);
    int neg, ovf;
    uint64_t m;
    if (s == NULL || parse_dec(s, &neg, &m, &ovf) != 0)
        return -1;
    *v = (neg && m != 0) || ovf ? UINT64_MAX : m;
    return 0;
}

/* ptp_ns: values >= 2^63 cannot be an int64; -1 fails the same rule. */
static int get_i64(const jl_object *req, const char *k, int64_t *v)
{
    const jl_str *s = get_str(req, k);
    int neg, ovf;
    uint64_t m;
    if (s == NULL || parse_dec(s, &neg, &m, &ovf) != 0)
        return -1;
    if (neg)
        *v = (ovf || m > (uint64_t)INT64_MAX) ? INT64_MIN : -(int64_t)m;
    else
        *v = (ovf || m > (uint64_t)INT64_MAX) ? -1 : (int64_t)m;
    return 0;
}

/* ---- operations --------------------------------------------------------- */

static void reply_error(const jl_object *req, ttext_status st)
{
    begin(req);
    put_str("errorClass", ttext_status_name(st));
    end();
}

/* Decoded fields, then the header re-encoded (binary and text); wire, when
 * not NULL, is the raw 53 bytes a text input carried. */
static void reply_header(const jl_object *req, const ttext_header *h, const uint8_t *wire)
{
    uint8_t raw[TTEXT_WIRE_LEN];
    char text[TTEXT_TEXT_BUF];
    char buf[32];

    if (ttext_encode(h, raw) != TTEXT_OK || ttext_to_text(h, text) != TTEXT_OK) {
        problem = "decoded header does not re-encode"; /* cannot happen: decode validated it */
        return;
    }
    begin(req);
    put_u64("tenantId", h->tenant_id);
    sprintf(buf, "%lld", (long long)h->ptp_ns);
    put_str("ptpNs", buf);
    put_u64("tsSource", h->ts_source);
    put_u64("clkQuality", h->clk_quality);
    put_u64("uncertaintyNs", h->uncertainty_ns);
    put_u64("lts", h->lts);
    put_hex("svcSketch", h->svc_sketch, TTEXT_SKETCH_BYTES);
    put_hex("reencoded", raw, sizeof raw);
    put_str("text", text);
    if (wire != NULL)
        put_hex("wire", wire, TTEXT_WIRE_LEN);
    end();
}

static void op_decode_bytes(const jl_object *req)
{
    const jl_str *s = get_str(req, "wire");
    ttext_header h;
    ttext_status st;
    uint8_t *raw;
    size_t n;

    if (s == NULL || (raw = from_hex(s, &n)) == NULL)
        return;
    st = ttext_decode(raw, n, &h);
    free(raw);
    if (st != TTEXT_OK)
        reply_error(req, st);
    else
        reply_header(req, &h, NULL);
}

static void op_decode_text(const jl_object *req)
{
    const jl_str *s = get_str(req, "text");
    uint8_t wire[TTEXT_WIRE_LEN];
    ttext_header h;
    ttext_status st;
    char *copy;

    if (s == NULL)
        return;
    copy = (char *)malloc(s->len ? s->len : 1); /* exact size, not NUL-terminated */
    if (copy == NULL) {
        problem = "out of memory";
        return;
    }
    memcpy(copy, s->ptr, s->len);
    st = ttext_from_text(copy, s->len, &h);
    if (st == TTEXT_OK)
        st = ttext_text_to_bytes(copy, s->len, wire);
    free(copy);
    if (st != TTEXT_OK)
        reply_error(req, st);
    else
        reply_header(req, &h, wire);
}

static void op_encode(const jl_object *req)
{
    ttext_header h;
    uint8_t raw[TTEXT_WIRE_LEN];
    char text[TTEXT_TEXT_BUF];
    const jl_str *sk;
    ttext_status st;

    memset(&h, 0, sizeof h);
    if (get_u32(req, "tenantId", &h.tenant_id) || get_i64(req, "ptpNs", &h.ptp_ns) ||
        get_u32(req, "tsSource", &h.ts_source) || get_u32(req, "clkQuality", &h.clk_quality) ||
        get_u32(req, "uncertaintyNs", &h.uncertainty_ns) || get_u64(req, "lts", &h.lts))
        return;
    sk = get_str(req, "svcSketch");
    if (sk == NULL || fixed_hex(sk, h.svc_sketch, TTEXT_SKETCH_BYTES) != 0)
        return;
    st = ttext_encode(&h, raw);
    if (st == TTEXT_OK)
        st = ttext_to_text(&h, text);
    if (st != TTEXT_OK) {
        reply_error(req, st);
        return;
    }
    begin(req);
    put_hex("wire", raw, sizeof raw);
    put_str("text", text);
    end();
}

/* Span id hex -> exactly-sized buffer; reply SPAN_ID for any length but 8. */
static int span_id(const jl_object *req, const jl_str *s, uint8_t out[TTEXT_SPAN_ID_LEN])
{
    unsigned idx[TTEXT_SKETCH_K];
    ttext_status st;
    size_t n;
    uint8_t *raw = from_hex(s, &n);

    if (raw == NULL)
        return -1;
    st = ttext_sketch_indices_n(raw, n, idx);
    if (st == TTEXT_OK)
        memcpy(out, raw, TTEXT_SPAN_ID_LEN);
    free(raw);
    if (st != TTEXT_OK) {
        reply_error(req, st);
        return -1;
    }
    return 0;
}

static void put_sketch(const uint8_t sketch[TTEXT_SKETCH_BYTES])
{
    put_hex("sketch", sketch, TTEXT_SKETCH_BYTES);
    put_u64("popcount", ttext_sketch_popcount(sketch));
}

static void put_double(const char *k, double v)
{
    char buf[40];
    sprintf(buf, "%.17g", v); /* round-trips any double exactly */
    put_str(k, buf);
}

static void op_sketch_indices(const jl_object *req)
{
    const jl_str *s = get_str(req, "spanId");
    uint8_t id[TTEXT_SPAN_ID_LEN], sketch[TTEXT_SKETCH_BYTES];
    unsigned idx[TTEXT_SKETCH_K], i;
    uint64_t h[2];

    if (s == NULL || span_id(req, s, id) != 0)
        return;
    ttext_murmur3_x64_128(id, sizeof id, 0, h);
    ttext_sketch_indices(id, idx);
    memset(sketch, 0, sizeof sketch);
    ttext_sketch_add(sketch, id);
    begin(req);
    put_u64("h1", h[0]);
    put_u64("h2", h[1]);
    key("indices");
    fputc('[', stdout);
    for (i = 0; i < TTEXT_SKETCH_K; i++)
        printf("%s\"%u\"", i ? "," : "", idx[i]);
    fputc(']', stdout);
    put_sketch(sketch);
    end();
}

static void op_sketch_merge(const jl_object *req)
{
    const jl_field *list = get_list(req, "sketches");
    uint8_t acc[TTEXT_SKETCH_BYTES], one[TTEXT_SKETCH_BYTES];
    size_t i;

    if (list == NULL)
        return;
    memset(acc, 0, sizeof acc);
    for (i = 0; i < list->n_items; i++) {
        if (fixed_hex(&list->items[i], one, sizeof one) != 0)
            return;
        ttext_sketch_merge(acc, one);
    }
    begin(req);
    put_hex("merged", acc, sizeof acc);
    put_u64("popcount", ttext_sketch_popcount(acc));
    end();
}

static void op_sketch_contains(const jl_object *req)
{
    const jl_str *sk = get_str(req, "sketch"), *s = get_str(req, "spanId");
    uint8_t sketch[TTEXT_SKETCH_BYTES], id[TTEXT_SPAN_ID_LEN];

    if (sk == NULL || s == NULL || fixed_hex(sk, sketch, sizeof sketch) != 0 || span_id(req, s, id) != 0)
        return;
    begin(req);
    put_str("member", ttext_sketch_contains(sketch, id) ? "true" : "false");
    put_u64("popcount", ttext_sketch_popcount(sketch));
    put_double("falsePositiveEstimate", ttext_sketch_fp_rate(sketch));
    end();
}

/* Steps are "tick" or "merge:<decimal>"; each yields the new value, or the
 * errorClass of a refused merge (the clock is then unchanged). */
static void op_lamport(const jl_object *req)
{
    const jl_field *steps = get_list(req, "steps");
    const jl_str *start = get_str(req, "start");
    ttext_lamport clock;
    char **results;
    uint64_t v;
    size_t i;
    ttext_status st;

    if (steps == NULL || start == NULL || get_u64(req, "start", &v) != 0)
        return;
    st = ttext_lamport_init(&clock, v);
    if (st != TTEXT_OK) {
        reply_error(req, st);
        return;
    }
    results = (char **)calloc(steps->n_items + 1, sizeof *results);
    if (results == NULL) {
        problem = "out of memory";
        return;
    }
    for (i = 0; i < steps->n_items && problem == NULL; i++) {
        const jl_str *step = &steps->items[i];
        char buf[32];
        if (step->len == 4 && memcmp(step->ptr, "tick", 4) == 0) {
            ttext_lamport_tick(&clock);
            sprintf(buf, "%llu", (unsigned long long)clock.value);
        } else if (step->len > 6 && memcmp(step->ptr, "merge:", 6) == 0) {
            jl_str num;
            int neg, ovf;
            uint64_t m;
            num.ptr = step->ptr + 6;
            num.len = step->len - 6;
            if (parse_dec(&num, &neg, &m, &ovf) != 0)
                break;
            st = ttext_lamport_merge(&clock, (neg && m != 0) || ovf ? UINT64_MAX : m);
            if (st != TTEXT_OK)
                strcpy(buf, ttext_status_name(st));
            else
                sprintf(buf, "%llu", (unsigned long long)clock.value);
        } else {
            problem = "unknown Lamport step";
            break;
        }
        results[i] = (char *)malloc(strlen(buf) + 1);
        if (results[i] == NULL) {
            problem = "out of memory";
            break;
        }
        strcpy(results[i], buf);
    }
    if (problem == NULL) {
        begin(req);
        key("values");
        fputc('[', stdout);
        for (i = 0; i < steps->n_items; i++) {
            if (i)
                fputc(',', stdout);
            jl_write_string(stdout, results[i], strlen(results[i]));
        }
        fputc(']', stdout);
        put_u64("final", clock.value);
        put_str("saturated", clock.saturated ? "true" : "false");
        end();
    }
    for (i = 0; i < steps->n_items; i++)
        free(results[i]);
    free(results);
}

/* ---- the torch carried record (record.h) ----------------------------------- */

static void reply_record_error(const jl_object *req, ttrec_status st, ttext_status header_status)
{
    begin(req);
    put_str("errorClass", ttrec_status_name(st));
    if (st == TTREC_E_HEADER)
        put_str("headerErrorClass", ttext_status_name(header_status));
    end();
}

/* A decoded record: its fields, the embedded header's, and the record encoded again. */
static void reply_record(const jl_object *req, const ttrec_record *r)
{
    uint8_t raw[TTREC_LEN];
    char buf[32];

    if (ttrec_encode(r, raw) != TTREC_OK) {
        problem = "decoded record does not re-encode"; /* cannot happen: decode checked it */
        return;
    }
    begin(req);
    put_u64("kind", r->kind);
    put_u64("rank", r->rank);
    put_u64("seq", r->seq);
    put_hex("traceId", r->trace_id, TTREC_TRACE_ID_LEN);
    put_hex("spanId", r->span_id, TTREC_SPAN_ID_LEN);
    put_u64("tenantId", r->header.tenant_id);
    sprintf(buf, "%lld", (long long)r->header.ptp_ns);
    put_str("ptpNs", buf);
    put_u64("tsSource", r->header.ts_source);
    put_u64("clkQuality", r->header.clk_quality);
    put_u64("uncertaintyNs", r->header.uncertainty_ns);
    put_u64("lts", r->header.lts);
    put_hex("svcSketch", r->header.svc_sketch, TTEXT_SKETCH_BYTES);
    put_hex("reencoded", raw, sizeof raw);
    end();
}

/* decode_record, or receive_record when expect is non-zero (the expectations are then read from req). */
static void record_op(const jl_object *req, int expect)
{
    const jl_str *s = get_str(req, "record");
    uint32_t kind = 0;
    uint64_t rank = 0, seq = 0;
    ttext_status hs;
    ttrec_status st;
    ttrec_record r;
    uint8_t *raw;
    size_t n;

    if (s == NULL)
        return;
    if (expect && (get_u32(req, "expectKind", &kind) || get_u64(req, "expectRank", &rank) ||
                   get_u64(req, "expectSeq", &seq)))
        return;
    if ((raw = from_hex(s, &n)) == NULL)
        return;
    st = expect ? ttrec_receive(raw, n, kind, rank, seq, &r, &hs) : ttrec_decode(raw, n, &r, &hs);
    free(raw);
    if (st != TTREC_OK)
        reply_record_error(req, st, hs);
    else
        reply_record(req, &r);
}

static void op_decode_record(const jl_object *req)
{
    record_op(req, 0);
}

static void op_receive_record(const jl_object *req)
{
    record_op(req, 1);
}

static void op_encode_record(const jl_object *req)
{
    const jl_str *seq_s = get_str(req, "seq"), *tid = get_str(req, "traceId"), *sid = get_str(req, "spanId");
    const jl_str *hdr = get_str(req, "header");
    ttrec_record r;
    uint8_t out[TTREC_LEN], *raw, *trace_id = NULL, *span_id = NULL;
    int neg, ovf;
    size_t n, n_trace = 0, n_span = 0;
    ttrec_status st = TTREC_OK;

    memset(&r, 0, sizeof r);
    if (seq_s == NULL || tid == NULL || sid == NULL || hdr == NULL || get_u32(req, "kind", &r.kind) ||
        get_u64(req, "rank", &r.rank) || parse_dec(seq_s, &neg, &r.seq, &ovf) != 0 ||
        (trace_id = from_hex(tid, &n_trace)) == NULL || (span_id = from_hex(sid, &n_span)) == NULL ||
        (raw = from_hex(hdr, &n)) == NULL) {
        free(trace_id);
        free(span_id);
        return;
    }
    /* A uint64 cannot hold a seq outside 0..2^64-1, nor a ttext_header octets that are not a
     * header, nor the id arrays an id of another length: the C types make these caller values
     * unrepresentable, so they are the caller's bad field (spec/torch.md section 3.2), as
     * ttrec_encode() says of the representable ones. */
    if ((neg && r.seq != 0) || ovf || n_trace != TTREC_TRACE_ID_LEN || n_span != TTREC_SPAN_ID_LEN ||
        ttext_decode(raw, n, &r.header) != TTEXT_OK)
        st = TTREC_E_FIELD;
    else {
        memcpy(r.trace_id, trace_id, TTREC_TRACE_ID_LEN);
        memcpy(r.span_id, span_id, TTREC_SPAN_ID_LEN);
    }
    free(trace_id);
    free(span_id);
    free(raw);
    if (st == TTREC_OK)
        st = ttrec_encode(&r, out);
    if (st != TTREC_OK) {
        reply_record_error(req, st, TTEXT_OK);
        return;
    }
    begin(req);
    put_hex("record", out, sizeof out);
    end();
}

static const struct {
    const char *name;
    void (*fn)(const jl_object *);
} ops[] = {
    {"decode_bytes", op_decode_bytes},     {"decode_text", op_decode_text},   {"encode", op_encode},
    {"sketch_indices", op_sketch_indices}, {"sketch_merge", op_sketch_merge}, {"sketch_contains", op_sketch_contains},
    {"lamport", op_lamport},
    {"decode_record", op_decode_record},   {"receive_record", op_receive_record}, {"encode_record", op_encode_record},
    {"decode_stamps", op_decode_stamps},   {"encode_stamps", op_encode_stamps},
};

static void handle(const char *line, size_t len)
{
    jl_object req;
    const char *err = NULL;
    const jl_field *op;
    size_t i;

    problem = NULL;
    if (jl_parse(line, len, &req, &err) != 0) {
        memset(&req, 0, sizeof req);
        begin(&req);
        put_str("adapterError", err);
        end();
        return;
    }
    op = jl_get(&req, "op");
    for (i = 0; op != NULL && !op->is_array && i < sizeof ops / sizeof ops[0]; i++) {
        if (op->value.len == strlen(ops[i].name) && memcmp(op->value.ptr, ops[i].name, op->value.len) == 0) {
            ops[i].fn(&req);
            break;
        }
    }
    if (op == NULL || op->is_array) {
        begin(&req);
        put_str("adapterError", "missing op");
        end();
    } else if (i == sizeof ops / sizeof ops[0]) {
        begin(&req);
        key("unsupported");
        jl_write_string(stdout, op->value.ptr, op->value.len);
        end();
    } else if (problem != NULL) {
        /* The op bailed out before replying. */
        begin(&req);
        put_str("adapterError", problem);
        end();
    }
    jl_free(&req);
}

int main(void)
{
    size_t cap = 4096, len = 0;
    char *line = (char *)malloc(cap);
    int c;

    if (line == NULL)
        return 1;
    while ((c = getchar()) != EOF) {
        if (c != '\n') {
            if (len == cap) {
                char *n;
                if (cap >= MAX_LINE) {
                    fprintf(stderr, "ttext-adapter: request line over %u bytes\n", MAX_LINE);
                    free(line);
                    return 1;
                }
                n = (char *)realloc(line, cap * 2);
                if (n == NULL) {
                    free(line);
                    return 1;
                }
                line = n;
                cap *= 2;
            }
            line[len++] = (char)c;
            continue;
        }
        if (len > 0)
            handle(line, len);
        len = 0;
    }
    if (len > 0)
        handle(line, len);
    free(line);
    return ferror(stdin) ? 1 : 0;
}
