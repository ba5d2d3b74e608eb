/* stamps.c -- the tempotrace.stamps text: grammar, relative values, canonical encoding (see stamps.h). */
#include "stamps.h"

#include <stdio.h>
#include <string.h>

static const char *const status_names[] = {
    "OK",           "STAMPS_TOO_MANY_SENDS", "STAMPS_START", "STAMPS_TOKEN", "STAMPS_ORDER", "STAMPS_END",
    "STAMPS_RECEIVE", "STAMPS_SKETCH",       "STAMPS_SEND",  "STAMPS_RANGE", "CAPACITY",
};

const char *ttst_status_name(ttst_status status)
{
    size_t i = (size_t)status;
    return i < sizeof status_names / sizeof status_names[0] ? status_names[i] : "UNKNOWN_STATUS";
}

/* ---- two-limb integers: value = hi * 10^18 + lo, wide enough for any sum a text makes ---- */

#define E18 INT64_C(1000000000000000000)
#define I63_HI 9                              /* 2^63 - 1 = 9 * 10^18 + I63_LO */
#define I63_LO INT64_C(223372036854775807)

typedef struct wide {
    int64_t hi, lo;
} wide;

/* Carry lo into hi so that 0 <= lo < 10^18 (limbs stay far from int64 limits: |lo| < 4 * 10^18). */
static wide w_norm(wide w)
{
    w.hi += w.lo / E18;
    w.lo %= E18;
    if (w.lo < 0) {
        w.lo += E18;
        w.hi -= 1;
    }
    return w;
}

static wide w_u64(uint64_t v)
{
    wide w;
    w.hi = (int64_t)(v / (uint64_t)E18);
    w.lo = (int64_t)(v % (uint64_t)E18);
    return w;
}

static wide w_i64(int64_t v)
{
    wide w;
    w.hi = v / E18;
    w.lo = v % E18;
    return w_norm(w);
}

static wide w_add(wide a, wide b)
{
    a.hi += b.hi;
    a.lo += b.lo;
    return w_norm(a);
}

static wide w_neg(wide a)
{
    a.hi = -a.hi;
    a.lo = -a.lo;
    return w_norm(a);
}

/* The value as int64 when it is 0..top (top <= 2^63 - 1); else -1. */
static int64_t w_in(wide w, int64_t top)
{
    int64_t v;
    if (w.hi < 0 || w.hi > I63_HI || (w.hi == I63_HI && w.lo > I63_LO))
        return -1;
    v = w.hi * E18 + w.lo;
    return v <= top ? v : -1;
}

/* Decimal text of w (canonical: no leading zero, no "-0") into buf of >= 48 bytes (what the compiler can prove). */
static void w_format(wide w, char *buf)
{
    const char *sign = "";
    if (w.hi < 0) {
        sign = "-";
        w = w_neg(w);
    }
    if (w.hi > 0)
        sprintf(buf, "%s%lld%018lld", sign, (long long)w.hi, (long long)w.lo);
    else
        sprintf(buf, "%s%lld", sign, (long long)w.lo);
}

/* ---- the grammar (section 1.4 ABNF) ------------------------------------------------------ */

#define MAX_DIGITS 20
#define MAX_FIELDS 7

/* One field: 'u' uint, 'i' int (canonical decimals, <= 20 digits), 'n' enum 0/1/2.  0 on success. */
static int field(const char *p, size_t n, char kind, wide *out)
{
    size_t i, digits, split;
    int negative = kind == 'i' && n > 0 && p[0] == '-';
    if (kind == 'n') {
        if (n != 1 || p[0] < '0' || p[0] > '2')
            return -1;
        out->hi = 0;
        out->lo = p[0] - '0';
        return 0;
    }
    p += negative;
    digits = n - (size_t)negative;
    if (digits == 0 || digits > MAX_DIGITS || (p[0] == '0' && (digits > 1 || negative)))
        return -1;
    out->hi = out->lo = 0;
    split = digits > 18 ? digits - 18 : 0; /* the digits before the last 18 go into hi */
    for (i = 0; i < digits; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        if (i < split)
            out->hi = out->hi * 10 + (p[i] - '0');
        else
            out->lo = out->lo * 10 + (p[i] - '0');
    }
    if (negative)
        *out = w_neg(*out);
    return 0;
}

/* The fields of a token's body (after its tag) if they match one of the shapes (a NULL-terminated
 * list; a shape is one kind letter per field); else the count 0. */
static size_t fields(const char *p, size_t n, const char *const *shapes, wide f[MAX_FIELDS])
{
    size_t starts[MAX_FIELDS + 1], count = 1, i, s;
    starts[0] = 0;
    for (i = 0; i < n; i++) {
        if (p[i] == ',') {
            if (count == MAX_FIELDS)
                return 0;
            starts[count++] = i + 1;
        }
    }
    starts[count] = n + 1;
    for (s = 0; shapes[s] != NULL; s++) {
        if (strlen(shapes[s]) != count)
            continue;
        for (i = 0; i < count; i++)
            if (field(p + starts[i], starts[i + 1] - 1 - starts[i], shapes[s][i], &f[i]) != 0)
                return 0;
        return count;
    }
    return 0;
}

/* Each token's fields as the ABNF allows them: lts, ts_source[, dt]; dlts[, dt[, bound, quality]];
 * lts, dptp, bound, quality, ts_source, tenant[, back]; dlts, dptp[, bound, quality]. */
static const char *const START_SHAPES[] = {"un", "uni", NULL};
static const char *const END_SHAPES[] = {"i", "ii", "iiun", NULL};
static const char *const RECEIVE_SHAPES[] = {"uiunnu", "uiunnui", NULL};
static const char *const SEND_SHAPES[] = {"ii", "iiun", NULL};

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static int b64_value(char c)
{
    const char *at = c != '\0' ? strchr(B64URL, c) : NULL;
    return at != NULL ? (int)(at - B64URL) : -1;
}

/* 43 characters -> 32 octets; the last character's two low (padding) bits must be 0. */
static int sketch(const char *p, size_t n, uint8_t out[TTST_SKETCH_BYTES])
{
    uint32_t acc = 0;
    size_t i, bits = 0, o = 0;
    if (n != 43)
        return -1;
    for (i = 0; i < n; i++) {
        int v = b64_value(p[i]);
        if (v < 0 || (i == n - 1 && (v & 3) != 0))
            return -1;
        acc = (acc << 6 | (uint32_t)v) & 0xFFFFu;
        bits += 6;
        if (bits >= 8 && o < TTST_SKETCH_BYTES) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    return 0;
}

/* ---- decode -------------------------------------------------------------------------------- */

size_t ttst_count_sends(const char *text, size_t len)
{
    size_t i, n = 0;
    for (i = 0; i + 1 < len; i++)
        n += text[i] == ' ' && text[i + 1] == 'x';
    return n;
}

/* Each absolute value in range, else TTST_E_RANGE from the enclosing function. */
#define IN(dst, w, top)                                                                                                \
    do {                                                                                                               \
        int64_t v_ = w_in((w), (top));                                                                                 \
        if (v_ < 0)                                                                                                    \
            return TTST_E_RANGE;                                                                                       \
        (dst) = v_;                                                                                                    \
    } while (0)

#define I63 INT64_MAX

static wide otel_base(uint64_t ns)
{
    return w_add(w_u64(ns), w_i64(TTST_TAI_UTC_BASE_NS));
}

/* A reading relative to the start (e, x): dlts, then the ptp_ns base + delta, then an optional bound. */
static ttst_status relative(const wide *f, size_t n, const ttst_stamps *st, wide ptp_base, ttst_reading *r)
{
    int64_t unc = st->start.uncertainty_ns;
    IN(r->lts, w_add(w_i64(st->start.lts), f[0]), I63);
    IN(r->ptp_ns, n >= 2 ? w_add(ptp_base, f[1]) : ptp_base, I63);
    r->clk_quality = st->start.clk_quality;
    if (n == 4) {
        IN(unc, f[2], (int64_t)TTST_UNCERTAINTY_MAX);
        r->clk_quality = (uint32_t)f[3].lo;
    }
    r->uncertainty_ns = (uint32_t)unc;
    return TTST_OK;
}

static ttst_status token(const char *p, size_t n, ttst_stamps *st, uint64_t end_ns, size_t sends_cap)
{
    wide f[MAX_FIELDS];
    size_t k;
    int64_t v;
    switch (p[0]) {
    case 'e':
        if ((k = fields(p + 1, n - 1, END_SHAPES, f)) == 0)
            return TTST_E_END;
        st->has_end = 1;
        return relative(f, k, st, otel_base(end_ns), &st->end);
    case 'r':
        if ((k = fields(p + 1, n - 1, RECEIVE_SHAPES, f)) == 0)
            return TTST_E_RECEIVE;
        st->has_remote = 1;
        IN(st->remote.header.lts, f[0], I63);
        IN(st->remote.header.ptp_ns, w_add(w_i64(st->start.ptp_ns), f[1]), I63);
        IN(v, f[2], (int64_t)TTST_UNCERTAINTY_MAX);
        st->remote.header.uncertainty_ns = (uint32_t)v;
        st->remote.header.clk_quality = (uint32_t)f[3].lo;
        st->remote.ts_source = (uint32_t)f[4].lo;
        IN(v, f[5], (int64_t)TTST_TENANT_MAX);
        st->remote.tenant_id = (uint32_t)v;
        st->remote.merged = k == 7;
        if (k == 7)
            IN(st->remote.recv_lts, w_add(w_i64(st->start.lts), w_neg(f[6])), I63);
        return TTST_OK;
    case 'k':
        if (sketch(p + 1, n - 1, st->sketch) != 0)
            return TTST_E_SKETCH;
        st->has_sketch = 1;
        return TTST_OK;
    default: /* 'x' */
        if ((k = fields(p + 1, n - 1, SEND_SHAPES, f)) == 0)
            return TTST_E_SEND;
        if (st->n_sends == sends_cap)
            return TTST_E_CAPACITY;
        return relative(f, k, st, w_i64(st->start.ptp_ns), &st->sends[st->n_sends++]);
    }
}

ttst_status ttst_decode(const char *text, size_t len, uint64_t start_ns, uint64_t end_ns, uint32_t uncertainty_ns,
                        uint32_t clk_quality, ttst_stamps *out, ttst_reading *sends, size_t sends_cap)
{
    static const char ORDER[] = "serkx";
    wide f[MAX_FIELDS];
    size_t a = 0, b, k;
    int place = 0;
    ttst_status status;

    if (ttst_count_sends(text, len) > TTST_MAX_SENDS)
        return TTST_E_TOO_MANY_SENDS;
    memset(out, 0, sizeof *out);
    out->sends = sends;
    for (b = 0; b < len && text[b] != ' '; b++)
        ;
    if (b == 0 || text[0] != 's' || (k = fields(text + 1, b - 1, START_SHAPES, f)) == 0)
        return TTST_E_START;
    IN(out->start.lts, f[0], I63);
    out->ts_source = (uint32_t)f[1].lo;
    IN(out->start.ptp_ns, k == 3 ? w_add(otel_base(start_ns), f[2]) : otel_base(start_ns), I63);
    /* The plain attributes are the start's bound and quality: range-checked as its values, never clamped. */
    if (uncertainty_ns > TTST_UNCERTAINTY_MAX || clk_quality > TTST_QUALITY_UNKNOWN)
        return TTST_E_RANGE;
    out->start.uncertainty_ns = uncertainty_ns;
    out->start.clk_quality = clk_quality;
    while (b < len) { /* text[b] is a space: a token follows, maybe an empty one */
        const char *tag;
        int at;
        a = b + 1;
        for (b = a; b < len && text[b] != ' '; b++)
            ;
        tag = a < b && text[a] != '\0' ? strchr(ORDER, text[a]) : NULL;
        if (tag == NULL)
            return TTST_E_TOKEN;
        at = (int)(tag - ORDER);
        if (at <= place && !(at == 4 && place == 4))
            return TTST_E_ORDER;
        place = at;
        if ((status = token(text + a, b - a, out, end_ns, sends_cap)) != TTST_OK)
            return status;
    }
    return TTST_OK;
}

/* ---- encode -------------------------------------------------------------------------------- */

size_t ttst_encoded_max(size_t n_sends)
{
    /* s 44, e 51, r 75, k 44 characters at most, each with its space; a send 51 with its space; NUL */
    return 45 + 52 + 76 + 45 + 52 * n_sends + 1;
}

typedef struct out_buf {
    char *p;
    size_t cap, len;
    int full;
} out_buf;

static void put(out_buf *o, const char *s)
{
    size_t n = strlen(s);
    if (o->full || o->len + n >= o->cap) {
        o->full = 1;
        return;
    }
    memcpy(o->p + o->len, s, n + 1);
    o->len += n;
}

static void put_w(out_buf *o, const char *before, wide w)
{
    char buf[48];
    put(o, before);
    w_format(w, buf);
    put(o, buf);
}

static void put_u(out_buf *o, const char *before, uint64_t v)
{
    put_w(o, before, w_u64(v));
}

static wide diff(int64_t a, int64_t b)
{
    return w_add(w_i64(a), w_neg(w_i64(b)));
}

static int differs(const ttst_reading *r, const ttst_reading *start)
{
    return r->uncertainty_ns != start->uncertainty_ns || r->clk_quality != start->clk_quality;
}

/* ",<uncertainty>,<quality>" of an end or a send, written only where they differ from the start's. */
static void own(out_buf *o, const ttst_reading *r, const ttst_reading *start)
{
    if (differs(r, start)) {
        put_u(o, ",", r->uncertainty_ns);
        put_u(o, ",", r->clk_quality);
    }
}

ttst_status ttst_encode(const ttst_stamps *st, uint64_t start_ns, uint64_t end_ns, char *out, size_t cap,
                        size_t *len)
{
    out_buf o;
    const ttst_reading *s = &st->start;
    wide dt = w_add(w_i64(s->ptp_ns), w_neg(otel_base(start_ns)));
    size_t i;

    o.p = out;
    o.cap = cap;
    o.len = 0;
    o.full = cap == 0;
    if (!o.full)
        out[0] = '\0';
    put_u(&o, "s", (uint64_t)s->lts);
    put_u(&o, ",", st->ts_source);
    if (dt.hi != 0 || dt.lo != 0)
        put_w(&o, ",", dt);
    if (st->has_end) {
        const ttst_reading *e = &st->end;
        wide edt = w_add(w_i64(e->ptp_ns), w_neg(otel_base(end_ns)));
        put_w(&o, " e", diff(e->lts, s->lts));
        if (edt.hi != 0 || edt.lo != 0 || differs(e, s)) /* dt is written when the bound follows it */
            put_w(&o, ",", edt);
        own(&o, e, s);
    }
    if (st->has_remote) {
        const ttst_received *r = &st->remote;
        put_u(&o, " r", (uint64_t)r->header.lts);
        put_w(&o, ",", diff(r->header.ptp_ns, s->ptp_ns));
        put_u(&o, ",", r->header.uncertainty_ns);
        put_u(&o, ",", r->header.clk_quality);
        put_u(&o, ",", r->ts_source);
        put_u(&o, ",", r->tenant_id);
        if (r->merged)
            put_w(&o, ",", diff(s->lts, r->recv_lts));
    }
    if (st->has_sketch) {
        char k[46];
        size_t c = 0, bits = 0;
        uint32_t acc = 0;
        k[c++] = 'k';
        for (i = 0; i < TTST_SKETCH_BYTES; i++) {
            acc = (acc << 8 | st->sketch[i]) & 0xFFFFu;
            for (bits += 8; bits >= 6; bits -= 6)
                k[c++] = B64URL[(acc >> (bits - 6)) & 63u];
        }
        k[c++] = B64URL[(acc << (6 - bits)) & 63u]; /* the last 4 bits and two zero bits */
        k[c] = '\0';
        put(&o, " ");
        put(&o, k);
    }
    for (i = 0; i < st->n_sends; i++) {
        const ttst_reading *x = &st->sends[i];
        put_w(&o, " x", diff(x->lts, s->lts));
        put_w(&o, ",", diff(x->ptp_ns, s->ptp_ns));
        own(&o, x, s);
    }
    if (o.full)
        return TTST_E_CAPACITY;
    *len = o.len;
    return TTST_OK;
}
