/* ttext.c -- tt-ext v3 codec, text form, SVC sketch and Lamport rules (see ttext.h). */
#include "ttext.h"

#include <string.h>

#include "murmur3.h"

/* Byte offsets of the wire layout (spec: header layout table). */
enum {
    OFF_VERSION_FLAGS = 0,
    OFF_PTP_NS = 1,
    OFF_TS_SOURCE = 9,
    OFF_CLK_QUALITY = 10,
    OFF_UNCERTAINTY = 11,
    OFF_LTS = 13,
    OFF_SKETCH = 21
};

#define MAX_ENUM 2u /* highest valid ts_source / clk_quality */

static const char *const status_names[] = {
    "OK",
    "LENGTH",
    "VERSION",
    "PTP_NS_RANGE",
    "TS_SOURCE",
    "CLK_QUALITY",
    "LTS_RANGE",
    "TENANT_ID",
    "UNCERTAINTY_RANGE",
    "TEXT_LENGTH",
    "TEXT_MULTIPLE",
    "TEXT_PADDING",
    "TEXT_ALPHABET",
    "TEXT_NON_CANONICAL",
    "TEXT_TYPE",
    "SPAN_ID",
    "ARGUMENT",
};

const char *ttext_status_name(ttext_status status)
{
    size_t i = (size_t)status;
    if (i >= sizeof status_names / sizeof status_names[0])
        return "UNKNOWN_STATUS";
    return status_names[i];
}

/* ---- big-endian helpers ------------------------------------------------ */

static uint64_t load_be64(const uint8_t *p)
{
    uint64_t v = 0;
    int i;
    for (i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

static void store_be64(uint8_t *p, uint64_t v)
{
    int i;
    for (i = 7; i >= 0; i--) {
        p[i] = (uint8_t)(v & 0xFFu);
        v >>= 8;
    }
}

/* ---- binary form ------------------------------------------------------- */

ttext_status ttext_encode(const ttext_header *h, uint8_t out[TTEXT_WIRE_LEN])
{
    uint32_t unc;

    if (h == NULL || out == NULL)
        return TTEXT_E_ARGUMENT;
    if (h->tenant_id > TTEXT_TENANT_MAX)
        return TTEXT_E_TENANT_ID;
    if (h->ptp_ns < 0)
        return TTEXT_E_PTP_NS_RANGE;
    if (h->ts_source > MAX_ENUM)
        return TTEXT_E_TS_SOURCE;
    if (h->clk_quality > MAX_ENUM)
        return TTEXT_E_CLK_QUALITY;
    if (h->uncertainty_ns > TTEXT_UNCERTAINTY_MAX)
        return TTEXT_E_UNCERTAINTY_RANGE;
    if (h->lts > TTEXT_LTS_MAX)
        return TTEXT_E_LTS_RANGE;

    /* UNKNOWN carries no usable physical time: always write "saturated". */
    unc = h->clk_quality == TTEXT_Q_UNKNOWN ? TTEXT_UNCERTAINTY_MAX : h->uncertainty_ns;

    out[OFF_VERSION_FLAGS] = (uint8_t)((h->tenant_id << 4) | TTEXT_VERSION);
    store_be64(out + OFF_PTP_NS, (uint64_t)h->ptp_ns);
    out[OFF_TS_SOURCE] = (uint8_t)h->ts_source;
    out[OFF_CLK_QUALITY] = (uint8_t)h->clk_quality;
    out[OFF_UNCERTAINTY] = (uint8_t)(unc >> 8);
    out[OFF_UNCERTAINTY + 1] = (uint8_t)(unc & 0xFFu);
    store_be64(out + OFF_LTS, h->lts);
    memcpy(out + OFF_SKETCH, h->svc_sketch, TTEXT_SKETCH_BYTES);
    return TTEXT_OK;
}

ttext_status ttext_decode(const uint8_t *buf, size_t len, ttext_header *out)
{
    ttext_header h;
    uint64_t ptp, lts;

    if (out == NULL || (buf == NULL && len != 0))
        return TTEXT_E_ARGUMENT;
    if (len != TTEXT_WIRE_LEN)
        return TTEXT_E_LENGTH;
    /* Fields in wire order; the first invalid one names the error. */
    if ((buf[OFF_VERSION_FLAGS] & 0x0Fu) != TTEXT_VERSION)
        return TTEXT_E_VERSION;
    ptp = load_be64(buf + OFF_PTP_NS);
    if (ptp > (uint64_t)INT64_MAX)
        return TTEXT_E_PTP_NS_RANGE;
    if (buf[OFF_TS_SOURCE] > MAX_ENUM)
        return TTEXT_E_TS_SOURCE;
    if (buf[OFF_CLK_QUALITY] > MAX_ENUM)
        return TTEXT_E_CLK_QUALITY;
    lts = load_be64(buf + OFF_LTS);
    if (lts > TTEXT_LTS_MAX)
        return TTEXT_E_LTS_RANGE;

    memset(&h, 0, sizeof h);
    h.lts = lts;
    h.tenant_id = (uint32_t)(buf[OFF_VERSION_FLAGS] >> 4);
    h.ptp_ns = (int64_t)ptp; /* ptp <= INT64_MAX, so the conversion is exact */
    h.ts_source = buf[OFF_TS_SOURCE];
    h.clk_quality = buf[OFF_CLK_QUALITY];
    h.uncertainty_ns = ((uint32_t)buf[OFF_UNCERTAINTY] << 8) | buf[OFF_UNCERTAINTY + 1];
    if (h.clk_quality == TTEXT_Q_UNKNOWN)
        h.uncertainty_ns = TTEXT_UNCERTAINTY_MAX;
    memcpy(h.svc_sketch, buf + OFF_SKETCH, TTEXT_SKETCH_BYTES);
    *out = h;
    return TTEXT_OK;
}

/* ---- text form (base64url, RFC 4648 section 5, no padding) ------------- */

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* 6-bit value of a base64url character, or -1. Explicit ranges: no locale,
 * no dependence on the execution character set beyond ASCII. */
static int b64url_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '-')
        return 62;
    if (c == '_')
        return 63;
    return -1;
}

static void bytes_to_text(const uint8_t in[TTEXT_WIRE_LEN], char out[TTEXT_TEXT_BUF])
{
    size_t i, o = 0;
    /* 17 full groups of 3 bytes -> 68 characters. */
    for (i = 0; i + 3 <= TTEXT_WIRE_LEN; i += 3) {
        uint32_t v = ((uint32_t)in[i] << 16) | ((uint32_t)in[i + 1] << 8) | in[i + 2];
        out[o++] = b64url[(v >> 18) & 63u];
        out[o++] = b64url[(v >> 12) & 63u];
        out[o++] = b64url[(v >> 6) & 63u];
        out[o++] = b64url[v & 63u];
    }
    /* 2 trailing bytes -> 3 characters, the last with 2 zero low bits. */
    {
        uint32_t v = ((uint32_t)in[51] << 8) | in[52];
        out[o++] = b64url[(v >> 10) & 63u];
        out[o++] = b64url[(v >> 4) & 63u];
        out[o++] = b64url[(v << 2) & 63u];
    }
    out[o] = '\0';
}

ttext_status ttext_to_text(const ttext_header *h, char out[TTEXT_TEXT_BUF])
{
    uint8_t raw[TTEXT_WIRE_LEN];
    ttext_status st;

    if (out == NULL)
        return TTEXT_E_ARGUMENT;
    st = ttext_encode(h, raw);
    if (st != TTEXT_OK)
        return st;
    bytes_to_text(raw, out);
    return TTEXT_OK;
}

static int is_ows(unsigned char c)
{
    return c == ' ' || c == '\t';
}

ttext_status ttext_text_to_bytes(const char *text, size_t len, uint8_t out[TTEXT_WIRE_LEN])
{
    const unsigned char *s = (const unsigned char *)text;
    uint8_t raw[TTEXT_WIRE_LEN];
    size_t i, o = 0;
    int last;

    if (out == NULL || (text == NULL && len != 0))
        return TTEXT_E_ARGUMENT;
    /* The cap counts octets as received, before stripping (spec section
     * 5.2 step 1): a hostile value is refused without reading it. */
    if (len > TTEXT_TEXT_MAX_INPUT)
        return TTEXT_E_TEXT_LENGTH;
    /* Strip HTTP optional white space on both ends. */
    while (len > 0 && is_ows(s[0])) {
        s++;
        len--;
    }
    while (len > 0 && is_ows(s[len - 1]))
        len--;
    /* Nothing left (also covers text == NULL with len == 0, which the
     * memchr calls below must never see). */
    if (len == 0)
        return TTEXT_E_TEXT_LENGTH;

    /* Whole-string rules in precedence order: each scans everything, so a
     * comma anywhere wins over padding, which wins over the alphabet. */
    if (memchr(s, ',', len) != NULL)
        return TTEXT_E_TEXT_MULTIPLE;
    if (memchr(s, '=', len) != NULL)
        return TTEXT_E_TEXT_PADDING;
    for (i = 0; i < len; i++)
        if (b64url_value(s[i]) < 0)
            return TTEXT_E_TEXT_ALPHABET;
    if (len != TTEXT_TEXT_LEN)
        return TTEXT_E_TEXT_LENGTH;
    last = b64url_value(s[TTEXT_TEXT_LEN - 1]);
    if ((last & 3) != 0)
        return TTEXT_E_TEXT_NON_CANONICAL;

    for (i = 0; i + 4 <= TTEXT_TEXT_LEN; i += 4) {
        uint32_t v = ((uint32_t)b64url_value(s[i]) << 18) | ((uint32_t)b64url_value(s[i + 1]) << 12) |
                     ((uint32_t)b64url_value(s[i + 2]) << 6) | (uint32_t)b64url_value(s[i + 3]);
        raw[o++] = (uint8_t)(v >> 16);
        raw[o++] = (uint8_t)((v >> 8) & 0xFFu);
        raw[o++] = (uint8_t)(v & 0xFFu);
    }
    {
        /* 68 characters consumed; 3 remain, carrying 16 bits + 2 zero bits. */
        uint32_t v = ((uint32_t)b64url_value(s[68]) << 12) | ((uint32_t)b64url_value(s[69]) << 6) |
                     (uint32_t)last;
        raw[o++] = (uint8_t)(v >> 10);
        raw[o++] = (uint8_t)((v >> 2) & 0xFFu);
    }
    memcpy(out, raw, TTEXT_WIRE_LEN);
    return TTEXT_OK;
}

ttext_status ttext_from_text(const char *text, size_t len, ttext_header *out)
{
    uint8_t raw[TTEXT_WIRE_LEN];
    ttext_status st;

    if (out == NULL)
        return TTEXT_E_ARGUMENT;
    st = ttext_text_to_bytes(text, len, raw);
    if (st != TTEXT_OK)
        return st;
    return ttext_decode(raw, sizeof raw, out);
}

/* ---- SVC sketch -------------------------------------------------------- */

void ttext_sketch_indices(const uint8_t span_id[TTEXT_SPAN_ID_LEN], unsigned idx[TTEXT_SKETCH_K])
{
    uint64_t h[2];
    unsigned i;

    ttext_murmur3_x64_128(span_id, TTEXT_SPAN_ID_LEN, 0, h);
    /* Unsigned arithmetic wraps mod 2^64 by definition; mod 256 = low byte. */
    for (i = 0; i < TTEXT_SKETCH_K; i++)
        idx[i] = (unsigned)((h[0] + (uint64_t)i * h[1]) % TTEXT_SKETCH_BITS);
}

ttext_status ttext_sketch_indices_n(const uint8_t *span_id, size_t len, unsigned idx[TTEXT_SKETCH_K])
{
    if (span_id == NULL && len != 0)
        return TTEXT_E_ARGUMENT;
    if (len != TTEXT_SPAN_ID_LEN)
        return TTEXT_E_SPAN_ID;
    ttext_sketch_indices(span_id, idx);
    return TTEXT_OK;
}

void ttext_sketch_indices_u64(uint64_t span_id, unsigned idx[TTEXT_SKETCH_K])
{
    uint8_t be[TTEXT_SPAN_ID_LEN];
    store_be64(be, span_id);
    ttext_sketch_indices(be, idx);
}

void ttext_sketch_add(uint8_t sketch[TTEXT_SKETCH_BYTES], const uint8_t span_id[TTEXT_SPAN_ID_LEN])
{
    unsigned idx[TTEXT_SKETCH_K], i;
    ttext_sketch_indices(span_id, idx);
    for (i = 0; i < TTEXT_SKETCH_K; i++)
        sketch[idx[i] / 8] |= (uint8_t)(0x80u >> (idx[i] % 8));
}

int ttext_sketch_contains(const uint8_t sketch[TTEXT_SKETCH_BYTES], const uint8_t span_id[TTEXT_SPAN_ID_LEN])
{
    unsigned idx[TTEXT_SKETCH_K], i;
    ttext_sketch_indices(span_id, idx);
    for (i = 0; i < TTEXT_SKETCH_K; i++)
        if ((sketch[idx[i] / 8] & (0x80u >> (idx[i] % 8))) == 0)
            return 0;
    return 1;
}

void ttext_sketch_merge(uint8_t dst[TTEXT_SKETCH_BYTES], const uint8_t src[TTEXT_SKETCH_BYTES])
{
    unsigned i;
    for (i = 0; i < TTEXT_SKETCH_BYTES; i++)
        dst[i] |= src[i];
}

unsigned ttext_sketch_popcount(const uint8_t sketch[TTEXT_SKETCH_BYTES])
{
    unsigned i, n = 0;
    for (i = 0; i < TTEXT_SKETCH_BYTES; i++) {
        unsigned b = sketch[i];
        while (b != 0) {
            b &= b - 1; /* clear the lowest set bit */
            n++;
        }
    }
    return n;
}

double ttext_sketch_fp_rate(const uint8_t sketch[TTEXT_SKETCH_BYTES])
{
    double fill = (double)ttext_sketch_popcount(sketch) / TTEXT_SKETCH_BITS;
    return fill * fill * fill * fill; /* k = 4 */
}

/* ---- Lamport counter --------------------------------------------------- */

ttext_status ttext_lamport_init(ttext_lamport *clock, uint64_t start)
{
    if (clock == NULL)
        return TTEXT_E_ARGUMENT;
    if (start > TTEXT_LTS_MAX)
        return TTEXT_E_LTS_RANGE;
    clock->value = start;
    clock->saturated = 0;
    return TTEXT_OK;
}

/* value = base + 1, or stay at the ceiling and remember that an event was
 * squeezed onto it (ordering information lost from here on). */
static void advance_from(ttext_lamport *clock, uint64_t base)
{
    if (base >= TTEXT_LTS_MAX) {
        clock->value = TTEXT_LTS_MAX;
        clock->saturated = 1;
    } else {
        clock->value = base + 1;
    }
}

int ttext_lamport_tick(ttext_lamport *clock)
{
    advance_from(clock, clock->value);
    return clock->saturated;
}

ttext_status ttext_lamport_receive(ttext_lamport *clock, uint64_t remote, int *merged)
{
    int merge;

    if (clock == NULL)
        return TTEXT_E_ARGUMENT;
    if (remote > TTEXT_LTS_MAX)
        return TTEXT_E_LTS_RANGE; /* poisoning guard: state unchanged */
    /* remote - value only when remote > value: no unsigned wrap-around. */
    merge = remote <= clock->value || remote - clock->value <= TTEXT_LAMPORT_MAX_AHEAD;
    advance_from(clock, merge && remote > clock->value ? remote : clock->value);
    if (merged != NULL)
        *merged = merge;
    return TTEXT_OK;
}

ttext_status ttext_lamport_merge(ttext_lamport *clock, uint64_t remote)
{
    return ttext_lamport_receive(clock, remote, NULL);
}
