/*
 * fuzz.h -- what the fuzz pass (fuzz.c) shares with its record part
 * (fuzz_record.c) and its stamps part (fuzz_stamps.c): the seeded generator, the seed pools, the generic
 * mutations and the count of violated properties.  Test code only.
 */
#ifndef TTEXT_FUZZ_H
#define TTEXT_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ttext.h"

#define MAX_SEEDS 4096
#define MAX_INPUT 2048 /* above the 256-character cap even in 4-octet characters, and every vector seed fits */

typedef struct seed {
    unsigned char data[MAX_INPUT];
    size_t len;
} seed;

/* splitmix64 from the -s seed; below(n) is in 0..n-1 (0 when n is 0). */
uint64_t rnd(void);
size_t below(size_t n);

/* Append n octets to a pool of MAX_SEEDS (dropped when full or longer than MAX_INPUT). */
void add_to(seed *pool, size_t *count, const unsigned char *p, size_t n);

/* 1-4 generic mutations in place (bit flips, truncation, extension, tokens, ...); the new length. */
size_t mutate(unsigned char *buf, size_t len);

extern unsigned long violations;

#define VIOLATION(...)                                                                                                 \
    do {                                                                                                               \
        violations++;                                                                                                  \
        fprintf(stderr, "fuzz: property violated: " __VA_ARGS__);                                                    \
        fputc('\n', stderr);                                                                                           \
    } while (0)

/* fuzz_record.c: a corpus record; a random valid record around header h; one iteration; the summary line. */
void fuzz_record_add_seed(const unsigned char *p, size_t n);
void fuzz_record_seed_from(const ttext_header *h);
void fuzz_record_one(void);
void fuzz_record_report(void);

/* fuzz_stamps.c: a corpus stamps text; one iteration (a mutated text, or random valid stamps); the summary. */
void fuzz_stamps_add_seed(const unsigned char *p, size_t n);
void fuzz_stamps_one(void);
void fuzz_stamps_report(void);

#endif /* TTEXT_FUZZ_H */
