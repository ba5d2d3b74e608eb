/*
 * fuzz.c -- seeded, bounded fuzz pass over the C codec and the adapter's
 * JSON parser.  Meant to run under -fsanitize=address,undefined: every input
 * lives in a heap buffer of exactly its length, so any read past the end is
 * reported.  Besides "no crash" it checks properties a caller relies on:
 *   - a decoded header re-encodes to the same bytes (uncertainty forced to
 *     0xFFFF when the quality is UNKNOWN);
 *   - the text decoder agrees with text_to_bytes + decode;
 *   - every status is a named class;
 *   - sketch add => contains, merge is a superset, Lamport never goes back
 *     and never passes 2^63-1;
 *   - records (record.h): see fuzz_record.c, one iteration in eight;
 *   - stamps texts (stamps.h): see fuzz_stamps.c, one iteration in eight.
 *
 * usage: fuzz [-n ITERATIONS] [-s SEED] [CORPUS]
 *   CORPUS lines: "b HEX" (binary input), "t HEX" (UTF-8 of a text input),
 *   "r HEX" (a record) or "s HEX" (a stamps text), as written by
 *   `conformance/run --write-corpus`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "jsonline.h"
#include "ttext.h"

static seed seeds[MAX_SEEDS];
static size_t n_seeds;
static uint64_t rng_state;
unsigned long violations;
static unsigned long outcomes[2][TTEXT_E_ARGUMENT + 1]; /* [binary, text][status]: shows what was reached */

/* splitmix64: tiny, seedable, good enough to choose mutations. */
uint64_t rnd(void)
{
    uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

size_t below(size_t n)
{
    return n ? (size_t)(rnd() % n) : 0;
}

void add_to(seed *pool, size_t *count, const unsigned char *p, size_t n)
{
    if (*count < MAX_SEEDS && n <= MAX_INPUT) {
        memcpy(pool[*count].data, p, n);
        pool[*count].len = n;
        (*count)++;
    }
}

static void add_seed(const unsigned char *p, size_t n)
{
    add_to(seeds, &n_seeds, p, n);
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static void load_corpus(const char *path)
{
    char line[2 * MAX_INPUT + 8];
    unsigned char buf[MAX_INPUT];
    FILE *f = fopen(path, "r");

    if (f == NULL) {
        perror(path);
        exit(2);
    }
    while (fgets(line, sizeof line, f) != NULL) {
        size_t n = 0, i = 2;
        if ((line[0] != 'b' && line[0] != 't' && line[0] != 'r' && line[0] != 's') || line[1] != ' ')
            continue;
        while (n < sizeof buf && hexval(line[i]) >= 0 && hexval(line[i + 1]) >= 0) {
            buf[n++] = (unsigned char)(hexval(line[i]) << 4 | hexval(line[i + 1]));
            i += 2;
        }
        if (line[0] == 'r')
            fuzz_record_add_seed(buf, n);
        else if (line[0] == 's')
            fuzz_stamps_add_seed(buf, n);
        else
            add_seed(buf, n);
    }
    fclose(f);
}

/* Random valid headers, binary and text, so the pass is useful without a corpus. */
static void builtin_seeds(void)
{
    int i;
    for (i = 0; i < 64; i++) {
        ttext_header h;
        uint8_t raw[TTEXT_WIRE_LEN];
        char text[TTEXT_TEXT_BUF];
        size_t j;
        memset(&h, 0, sizeof h);
        h.tenant_id = (uint32_t)below(16);
        h.ptp_ns = (int64_t)(rnd() >> 1);
        h.ts_source = (uint32_t)below(3);
        h.clk_quality = (uint32_t)below(3);
        h.uncertainty_ns = (uint32_t)below(65536);
        h.lts = rnd() >> 1;
        for (j = 0; j < TTEXT_SKETCH_BYTES; j++)
            h.svc_sketch[j] = (uint8_t)rnd();
        if (ttext_encode(&h, raw) != TTEXT_OK || ttext_to_text(&h, text) != TTEXT_OK)
            VIOLATION("valid random header refused by the encoder");
        add_seed(raw, sizeof raw);
        add_seed((const unsigned char *)text, strlen(text));
        fuzz_record_seed_from(&h);
    }
}

/* Bytes worth inserting: OWS, separators, other alphabets, NUL, UTF-8 (valid and broken). */
static const char *const tokens[] = {" ", "\t", ",", "=", "+", "/", ".", "\n", "\r\n", "\v", "A", "_", "-",
                                     "\xc3\xa9", "\xef\xbc\xa1", "\xf0\x9f\x98\x80", "\xed\xa0\x80", "\x80",
                                     "\xff", "\xc3", "\xe2\x80\xaf", "\xc2\xa0"};

size_t mutate(unsigned char *buf, size_t len)
{
    size_t rounds = 1 + below(4), r;
    for (r = 0; r < rounds; r++) {
        switch (below(9)) {
        case 0: /* bit flip */
            if (len)
                buf[below(len)] ^= (unsigned char)(1u << below(8));
            break;
        case 1: /* random byte */
            if (len)
                buf[below(len)] = (unsigned char)rnd();
            break;
        case 2: /* truncate */
            len = below(len + 1);
            break;
        case 3: /* extend with random bytes */
        {
            size_t add = 1 + below(80);
            while (add-- && len < MAX_INPUT)
                buf[len++] = (unsigned char)rnd();
            break;
        }
        case 4: /* insert a token */
        case 5: {
            const char *t = tokens[below(sizeof tokens / sizeof tokens[0])];
            size_t tl = strlen(t), at = below(len + 1);
            if (len + tl <= MAX_INPUT) {
                memmove(buf + at + tl, buf + at, len - at);
                memcpy(buf + at, t, tl);
                len += tl;
            }
            break;
        }
        case 6: /* delete a range */
            if (len) {
                size_t at = below(len), n = 1 + below(len - at);
                memmove(buf + at, buf + at + n, len - at - n);
                len -= n;
            }
            break;
        case 7: /* pad with OWS up to around the 256-character cap */
        {
            size_t target = 250 + below(12);
            while (len < target && len < MAX_INPUT)
                buf[len++] = below(2) ? ' ' : '\t';
            break;
        }
        default: /* duplicate (two values back to back) */
            if (len && 2 * len <= MAX_INPUT) {
                memcpy(buf + len, buf, len);
                len *= 2;
            }
            break;
        }
    }
    return len;
}

static void check_status(ttext_status st)
{
    if (strcmp(ttext_status_name(st), "UNKNOWN_STATUS") == 0)
        VIOLATION("status %d has no class name", (int)st);
}

/* Decoding then re-encoding gives the input back, but for UNKNOWN's uncertainty. */
static void check_reencode(const ttext_header *h, const uint8_t *raw)
{
    uint8_t again[TTEXT_WIRE_LEN], want[TTEXT_WIRE_LEN];
    memcpy(want, raw, TTEXT_WIRE_LEN);
    if (h->clk_quality == TTEXT_Q_UNKNOWN)
        want[11] = want[12] = 0xFF;
    if (ttext_encode(h, again) != TTEXT_OK || memcmp(again, want, TTEXT_WIRE_LEN) != 0)
        VIOLATION("decoded header does not re-encode to its bytes");
}

static void one_codec_input(const unsigned char *src, size_t len)
{
    /* Exact-size copy: ASan flags any read past len. malloc(0) may be NULL, so keep 1. */
    unsigned char *buf = (unsigned char *)malloc(len ? len : 1);
    ttext_header h;
    uint8_t raw[TTEXT_WIRE_LEN];
    ttext_status st, st_text, st_bytes;

    if (buf == NULL)
        exit(3);
    memcpy(buf, src, len);

    st = ttext_decode(buf, len, &h);
    check_status(st);
    outcomes[0][st]++;
    if (st == TTEXT_OK)
        check_reencode(&h, buf);

    st_text = ttext_from_text((const char *)buf, len, &h);
    check_status(st_text);
    outcomes[1][st_text]++;
    st_bytes = ttext_text_to_bytes((const char *)buf, len, raw);
    check_status(st_bytes);
    if (st_bytes != TTEXT_OK && st_text != st_bytes)
        VIOLATION("from_text (%s) and text_to_bytes (%s) disagree", ttext_status_name(st_text),
                  ttext_status_name(st_bytes));
    if (st_bytes == TTEXT_OK) {
        ttext_header h2;
        if (ttext_decode(raw, sizeof raw, &h2) != st_text)
            VIOLATION("from_text is not text_to_bytes + decode");
        if (st_text == TTEXT_OK)
            check_reencode(&h, raw);
    }
    free(buf);
}

/* Request lines for the JSON parser: mutated copies of protocol requests. */
static const char *const requests[] = {
    "{\"id\":\"1\",\"op\":\"decode_text\",\"text\":\"AxeX\\u00e9\\ud83d\\ude00\\ud800\\\"\\\\\\/\\b\\f\\n\\r\\t\"}",
    "{\"id\":\"2\",\"op\":\"sketch_merge\",\"sketches\":[\"00ff\",\"ff00\"]}",
    "{\"id\":\"3\",\"op\":\"lamport\",\"start\":\"0\",\"steps\":[\"tick\",\"merge:5\"]}",
    " { \"a\" : [ ] , \"b\" : \"\" } ",
};

static void one_json_input(void)
{
    unsigned char tmp[MAX_INPUT];
    const char *req = requests[below(sizeof requests / sizeof requests[0])];
    size_t len = strlen(req);
    char *buf;
    jl_object obj;
    const char *err = NULL;

    memcpy(tmp, req, len);
    len = mutate(tmp, len);
    buf = (char *)malloc(len ? len : 1);
    if (buf == NULL)
        exit(3);
    memcpy(buf, tmp, len);
    if (jl_parse(buf, len, &obj, &err) == 0) {
        size_t i;
        for (i = 0; i < obj.n_fields; i++)
            if (obj.fields[i].key.ptr == NULL)
                VIOLATION("parsed field without a key");
        jl_get(&obj, "id");
        jl_free(&obj);
    } else if (err == NULL) {
        VIOLATION("parse failure without a message");
    }
    free(buf);
}

static void one_sketch_lamport(void)
{
    uint8_t a[TTEXT_SKETCH_BYTES], b[TTEXT_SKETCH_BYTES], id[TTEXT_SPAN_ID_LEN];
    ttext_lamport clock;
    uint64_t before;
    size_t i, n = 1 + below(40);

    memset(a, 0, sizeof a);
    for (i = 0; i < sizeof b; i++)
        b[i] = (uint8_t)rnd();
    for (i = 0; i < n; i++) {
        size_t j;
        for (j = 0; j < sizeof id; j++)
            id[j] = (uint8_t)rnd();
        ttext_sketch_add(a, id);
        if (!ttext_sketch_contains(a, id))
            VIOLATION("added span id not contained");
    }
    ttext_sketch_merge(b, a);
    for (i = 0; i < sizeof a; i++)
        if ((a[i] & b[i]) != a[i])
            VIOLATION("merge lost bits");
    if (ttext_sketch_popcount(b) > 256 || ttext_sketch_popcount(a) > 4 * n)
        VIOLATION("popcount out of range");

    if (ttext_lamport_init(&clock, below(2) ? rnd() >> 1 : TTEXT_LTS_MAX - below(4)) != TTEXT_OK)
        VIOLATION("valid start refused");
    for (i = 0; i < 8; i++) {
        before = clock.value;
        if (below(2)) {
            ttext_lamport_tick(&clock);
        } else {
            /* Random remotes are mostly far ahead or behind; half land near the
             * bound, where merging stops (spec section 10.1). */
            uint64_t remote = below(2) ? rnd() >> below(3)
                                       : before + TTEXT_LAMPORT_MAX_AHEAD - 2 + below(4);
            int merged = -1, ahead_ok = remote <= before || remote - before <= TTEXT_LAMPORT_MAX_AHEAD;
            ttext_status st = ttext_lamport_receive(&clock, remote, &merged);
            if ((st == TTEXT_E_LTS_RANGE) != (remote > TTEXT_LTS_MAX))
                VIOLATION("merge of %llu gave %s", (unsigned long long)remote, ttext_status_name(st));
            if (st == TTEXT_OK && merged != ahead_ok)
                VIOLATION("merged flag %d for remote %llu at %llu", merged, (unsigned long long)remote,
                          (unsigned long long)before);
            if (st == TTEXT_OK && merged && clock.value <= remote && remote < TTEXT_LTS_MAX)
                VIOLATION("merge did not pass the remote value");
            if (st == TTEXT_OK && !merged && clock.value != before + 1 && !clock.saturated)
                VIOLATION("a receive that did not merge was not a plain tick");
        }
        if (clock.value < before || clock.value > TTEXT_LTS_MAX)
            VIOLATION("Lamport counter went back or past 2^63-1");
    }
}

int main(int argc, char **argv)
{
    unsigned long iterations = 200000, i;
    unsigned long long seed_arg = 1;
    const char *corpus = NULL;
    int a;

    for (a = 1; a < argc; a++) {
        if (strcmp(argv[a], "-n") == 0 && a + 1 < argc)
            iterations = strtoul(argv[++a], NULL, 10);
        else if (strcmp(argv[a], "-s") == 0 && a + 1 < argc)
            seed_arg = strtoull(argv[++a], NULL, 10);
        else if (argv[a][0] != '-')
            corpus = argv[a];
        else {
            fprintf(stderr, "usage: %s [-n ITERATIONS] [-s SEED] [CORPUS]\n", argv[0]);
            return 2;
        }
    }
    rng_state = seed_arg;
    if (corpus != NULL)
        load_corpus(corpus);
    builtin_seeds();

    for (i = 0; i < iterations; i++) {
        unsigned char buf[MAX_INPUT];
        size_t len;
        switch (i % 8) {
        case 0: /* pure noise */
            len = below(MAX_INPUT + 1);
            {
                size_t j;
                for (j = 0; j < len; j++)
                    buf[j] = (unsigned char)rnd();
            }
            one_codec_input(buf, len);
            break;
        case 1:
            one_json_input();
            break;
        case 2:
            one_sketch_lamport();
            break;
        case 3:
            fuzz_record_one();
            break;
        case 4:
            fuzz_stamps_one();
            break;
        default: {
            const seed *s = &seeds[below(n_seeds)];
            memcpy(buf, s->data, s->len);
            len = mutate(buf, s->len);
            one_codec_input(buf, len);
            break;
        }
        }
    }
    for (a = 0; a < 2; a++) {
        int st;
        printf("fuzz: %s outcomes:", a ? "text" : "binary");
        for (st = 0; st <= TTEXT_E_ARGUMENT; st++)
            if (outcomes[a][st])
                printf(" %s=%lu", ttext_status_name((ttext_status)st), outcomes[a][st]);
        putchar('\n');
    }
    fuzz_record_report();
    fuzz_stamps_report();
    printf("fuzz: %lu iterations, seed %llu, %lu seeds, %lu property violations\n", iterations, seed_arg,
           (unsigned long)n_seeds, violations);
    return violations == 0 ? 0 : 1;
}
