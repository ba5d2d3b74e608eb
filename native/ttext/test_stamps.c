/*
 * test_stamps.c -- unit tests of the stamps-text codec (stamps.h) that do not
 * need the vector files: the examples of spec/semantic-conventions.md section
 * 1.4, sums wider than int64 (20-digit dt, OpenTelemetry times up to
 * 2^64-1), each error class and its precedence, the caller's capacity.  Exit
 * status 0 when every check passes; each failure prints its line.
 */
#include <stdio.h>
#include <string.h>

#include "stamps.h"
#include "test_check.h"

#define CHECK_ST(expr, want) CHECK_STATUS(ttst_status, ttst_status_name, expr, want)
#define T UINT64_C(1700000000000000000)
#define B (INT64_C(1700000000000000000) + TTST_TAI_UTC_BASE_NS)

static ttst_reading sends[8];
static ttst_stamps st;

static ttst_status dec(const char *text, uint64_t start_ns, uint64_t end_ns)
{
    return ttst_decode(text, strlen(text), start_ns, end_ns, 220, 0, &st, sends, 8);
}

/* decode then encode gives the text back (it is canonical). */
static int canonical(const char *text, uint64_t start_ns, uint64_t end_ns)
{
    char out[512];
    size_t len;
    return dec(text, start_ns, end_ns) == TTST_OK &&
           ttst_encode(&st, start_ns, end_ns, out, sizeof out, &len) == TTST_OK && len == strlen(text) &&
           strcmp(out, text) == 0;
}

static void test_spec_examples(void)
{
    CHECK(canonical("s81234,0 e3", T, T + 500));
    CHECK(st.start.ptp_ns == B && st.start.lts == 81234 && st.has_end && st.end.lts == 81237);
    CHECK(st.end.ptp_ns == B + 500 && st.end.uncertainty_ns == 220 && !st.has_remote && st.n_sends == 0);
    CHECK(canonical("s81234,2,1523 e3,812", T, T));
    CHECK(st.start.ptp_ns == B + 1523 && st.ts_source == 2 && st.end.ptp_ns == B + 812);
    CHECK(canonical("s57,2,4797 e2,3445 r2,-233096,65535,2,2,1,1 kAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA x1,20681",
                    T, T));
    CHECK(st.remote.header.ptp_ns == B + 4797 - 233096 && st.remote.merged && st.remote.recv_lts == 56);
    CHECK(st.remote.tenant_id == 1 && st.has_sketch && st.n_sends == 1 && st.sends[0].lts == 58);
}

static void test_wide_sums(void)
{
    /* start 2^64-1: dt -(2^64 - 1 + 37 s - 1) brings ptp_ns to 1 (20 digits). */
    CHECK(canonical("s5,0,-18446744110709551614", UINT64_MAX, UINT64_MAX));
    CHECK(st.start.ptp_ns == 1);
    CHECK_ST(dec("s5,0", UINT64_MAX, UINT64_MAX), TTST_E_RANGE);
    CHECK_ST(dec("s5,0,-99999999999999999999", 0, 0), TTST_E_RANGE);
    CHECK_ST(dec("s5,0 e99999999999999999999", T, T), TTST_E_RANGE);
    CHECK(canonical("s9223372036854775807,0 r3,0,6,1,2,7,9223372036854775807", T, T));
    CHECK(st.remote.recv_lts == 0);
    CHECK_ST(dec("s5,0 r3,0,6,1,2,7,-9223372036854775803", T, T), TTST_E_RANGE); /* recv lts 2^63 */
    CHECK(canonical("s0,0,-1700000037000000000 e9223372036854775807", T, T));
    CHECK(st.start.ptp_ns == 0 && st.end.lts == INT64_MAX);
}

static void test_classes_and_precedence(void)
{
    CHECK_ST(dec("", T, T), TTST_E_START);
    CHECK_ST(dec("s05,0", T, T), TTST_E_START);
    CHECK_ST(dec("s5,0,-0", T, T), TTST_E_START);
    CHECK_ST(dec("s5,0,123456789012345678901", T, T), TTST_E_START);
    CHECK_ST(dec("s5,0 ", T, T), TTST_E_TOKEN);
    CHECK_ST(dec("s5,0  e1", T, T), TTST_E_TOKEN);
    CHECK_ST(dec("s5,0 e1 e1", T, T), TTST_E_ORDER);
    CHECK_ST(dec("s5,0 x1,1 e1", T, T), TTST_E_ORDER);
    CHECK_ST(dec("s5,0 e1,0,220,3", T, T), TTST_E_END);
    CHECK_ST(dec("s5,0 r3,-5,6,1,2,-7", T, T), TTST_E_RECEIVE);
    CHECK_ST(dec("s5,0 kAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB", T, T), TTST_E_SKETCH);
    CHECK_ST(dec("s5,0 x1", T, T), TTST_E_SEND);
    CHECK_ST(dec("s5,0 r3,-5,6,1,2,16", T, T), TTST_E_RANGE);
    CHECK_ST(dec("s5,0 e-9 x1", T, T), TTST_E_RANGE);   /* the first token at fault */
    CHECK_ST(dec("s5,0 x1,1 e", T, T), TTST_E_ORDER);   /* order before grammar */
    CHECK_ST(dec("s99999999999999999999,9", T, T), TTST_E_START); /* grammar before range */
}

/* The plain attributes are the start's bound and quality: range-checked with its values (section 1.4). */
static void test_plain_attributes(void)
{
    CHECK_ST(ttst_decode("s5,0", 4, T, T, 65535, 0, &st, sends, 8), TTST_OK);
    CHECK(st.start.uncertainty_ns == 65535 && st.start.clk_quality == 0);
    CHECK_ST(ttst_decode("s5,0", 4, T, T, 65536, 0, &st, sends, 8), TTST_E_RANGE);
    CHECK_ST(ttst_decode("s5,0", 4, T, T, 220, 3, &st, sends, 8), TTST_E_RANGE);
    CHECK_ST(ttst_decode("s5,0", 4, T, T, UINT32_MAX, UINT32_MAX, &st, sends, 8), TTST_E_RANGE);
    CHECK_ST(ttst_decode("s5", 2, T, T, 70000, 0, &st, sends, 8), TTST_E_START);      /* grammar first */
    CHECK_ST(ttst_decode("s5,0 e", 6, T, T, 220, 3, &st, sends, 8), TTST_E_RANGE);    /* the start before the end */
}

static void test_count_and_capacity(void)
{
    static char big[2 * (TTST_MAX_SENDS + 1) + 2];
    size_t i, n = 1;
    char out[8];
    size_t len;
    big[0] = 's';
    for (i = 0; i <= TTST_MAX_SENDS; i++) {
        big[n++] = ' ';
        big[n++] = 'x';
    }
    CHECK(ttst_count_sends(big, n) == TTST_MAX_SENDS + 1);
    CHECK_ST(ttst_decode(big, n, T, T, 220, 0, &st, sends, 8), TTST_E_TOO_MANY_SENDS);
    CHECK_ST(ttst_decode(big, n - 2, T, T, 220, 0, &st, sends, 8), TTST_E_START); /* at the limit */
    CHECK_ST(ttst_decode("s5,0 x1,1 x2,2", 14, T, T, 220, 0, &st, sends, 1), TTST_E_CAPACITY);
    CHECK_ST(dec("s5,0 x1,1 x2,2", T, T), TTST_OK);
    CHECK_ST(ttst_encode(&st, T, T, out, sizeof out, &len), TTST_E_CAPACITY);
    CHECK(ttst_encoded_max(2) > strlen("s5,0 x1,1 x2,2"));
}

static void test_names(void)
{
    CHECK(strcmp(ttst_status_name(TTST_E_TOO_MANY_SENDS), "STAMPS_TOO_MANY_SENDS") == 0);
    CHECK(strcmp(ttst_status_name(TTST_E_RANGE), "STAMPS_RANGE") == 0);
    CHECK(strcmp(ttst_status_name((ttst_status)99), "UNKNOWN_STATUS") == 0);
}

int main(void)
{
    test_spec_examples();
    test_wide_sums();
    test_classes_and_precedence();
    test_plain_attributes();
    test_count_and_capacity();
    test_names();
    printf("test_stamps: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
