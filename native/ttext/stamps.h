/*
 * stamps.h -- C99 reference codec for the tempotrace.stamps span attribute
 * (spec/semantic-conventions.md section 1.4): every stamp of a span in one
 * line of tokens, most numbers relative to what the span already carries.
 *
 *   s<lts>,<ts_source>[,<dt>]                          the start (always first)
 *   e<dlts>[,<dt>[,<uncertainty_ns>,<quality>]]         the end
 *   r<lts>,<dptp>,<uncertainty_ns>,<quality>,<ts_source>,<tenant>[,<back>]
 *   k<43 base64url characters>                          the sketch
 *   x<dlts>,<dptp>[,<uncertainty_ns>,<quality>]         one per header sent
 *
 * Written from the spec's ABNF, not from tempotrace_sdk/stamptext.py, so that
 * the conformance vectors (conformance/vectors/tt_stamps_text_test.json) are
 * checked by two independent implementations.  libc only; no allocation (the
 * caller gives the array the sends go into); every input is a (pointer,
 * length) pair and nothing is read past it.
 *
 * dt and the OpenTelemetry times are wider than int64 together (an OTLP time
 * is a uint64 and dt may have 20 digits), so sums are made in two base-10^18
 * limbs: any value a text can hold is computed exactly, then range-checked.
 */
#ifndef TTEXT_STAMPS_H
#define TTEXT_STAMPS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TTST_MAX_SENDS (UINT32_C(1) << 20)       /* x tokens one text may hold */
#define TTST_TAI_UTC_BASE_NS INT64_C(37000000000) /* a constant of the encoding, not a leap table */
#define TTST_SKETCH_BYTES 32
#define TTST_UNCERTAINTY_MAX 65535u /* also the start's bound when the span lacks the plain attribute */
#define TTST_QUALITY_UNKNOWN 2u     /* the start's quality when the span lacks the plain attribute */
#define TTST_TENANT_MAX 15u

/*
 * Result of every call; each value from TTST_E_TOO_MANY_SENDS to TTST_E_RANGE
 * is an errorClass of the vectors, named by ttst_status_name().  A text that
 * breaks several rules gets the first: the count of sends, then the tokens
 * left to right, each its place, its grammar, its values' ranges.
 */
typedef enum ttst_status {
    TTST_OK = 0,
    TTST_E_TOO_MANY_SENDS, /* more than TTST_MAX_SENDS "SP x" in the text, counted first */
    TTST_E_START,          /* the first token is not a start */
    TTST_E_TOKEN,          /* a later token without a known tag (an empty one: two, a leading or trailing SP) */
    TTST_E_ORDER,          /* a known tag out of order or repeated */
    TTST_E_END,            /* an e token outside its grammar */
    TTST_E_RECEIVE,        /* an r token outside its grammar */
    TTST_E_SKETCH,         /* a k token: not 43 base64url characters, or padding bits set */
    TTST_E_SEND,           /* an x token outside its grammar */
    TTST_E_RANGE,          /* an absolute value outside its field's range */
    TTST_E_CAPACITY        /* caller's buffer too small (not a text rule) */
} ttst_status;

/* One event of the span, absolute: TAI ns, 3-sigma bound, quality (0 OK, 1 DEGRADED, 2 UNKNOWN), Lamport. */
typedef struct ttst_reading {
    int64_t ptp_ns;
    uint32_t uncertainty_ns;
    uint32_t clk_quality;
    int64_t lts;
} ttst_reading;

/* The header the span's remote parent came with; recv_lts only when merged is non-zero. */
typedef struct ttst_received {
    ttst_reading header; /* its ptp_ns, bound, quality and lts */
    uint32_t ts_source;
    uint32_t tenant_id;
    int merged;
    int64_t recv_lts;
} ttst_received;

typedef struct ttst_stamps {
    ttst_reading start;
    uint32_t ts_source; /* 0 GTE, 1 SW_GCC, 2 CPU */
    int has_end;
    ttst_reading end;
    int has_remote;
    ttst_received remote;
    int has_sketch;
    uint8_t sketch[TTST_SKETCH_BYTES];
    ttst_reading *sends; /* the caller's array */
    size_t n_sends;
} ttst_stamps;

/* How many "SP x" the text holds: the rule's count, and at least the sends it decodes to. */
size_t ttst_count_sends(const char *text, size_t len);

/*
 * Decode len bytes at text.  start_ns/end_ns are the span's OpenTelemetry
 * times; uncertainty_ns/clk_quality its plain attributes (each absent one:
 * TTST_UNCERTAINTY_MAX, TTST_QUALITY_UNKNOWN; a present one above those is
 * TTST_E_RANGE, checked with the start token's values).  The sends go into sends[],
 * which must hold min(ttst_count_sends(), TTST_MAX_SENDS) readings (else
 * TTST_E_CAPACITY).  On success *out holds every value; on failure its
 * contents are unspecified.
 */
ttst_status ttst_decode(const char *text, size_t len, uint64_t start_ns, uint64_t end_ns, uint32_t uncertainty_ns,
                        uint32_t clk_quality, ttst_stamps *out, ttst_reading *sends, size_t sends_cap);

/* An upper bound of the encoded length of stamps with n sends, terminating NUL included. */
size_t ttst_encoded_max(size_t n_sends);

/*
 * The one canonical text of st (values assumed valid: a writer's own
 * readings), NUL-terminated, into out (cap bytes); *len its length.
 * TTST_E_CAPACITY when cap is too small (ttst_encoded_max() always suffices).
 */
ttst_status ttst_encode(const ttst_stamps *st, uint64_t start_ns, uint64_t end_ns, char *out, size_t cap,
                        size_t *len);

/* The errorClass of a status ("STAMPS_START", ...), "OK", or "CAPACITY". */
const char *ttst_status_name(ttst_status status);

#ifdef __cplusplus
}
#endif

#endif /* TTEXT_STAMPS_H */
