/*
 * test_check.h -- the check macros of the C unit tests (test_ttext.c,
 * test_record.c): count every check, print each failure with its line, and
 * let main() report `checks` and `failures`.  Include once per test program.
 */
#ifndef TTEXT_TEST_CHECK_H
#define TTEXT_TEST_CHECK_H

#include <stdio.h>

static int failures;
static int checks;

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        checks++;                                                                                                      \
        if (!(cond)) {                                                                                                 \
            failures++;                                                                                                \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                               \
        }                                                                                                              \
    } while (0)

/* expr, of the status type `type`, must equal want; `name` turns a status into its class name. */
#define CHECK_STATUS(type, name, expr, want)                                                                           \
    do {                                                                                                               \
        type got_ = (expr);                                                                                            \
        checks++;                                                                                                      \
        if (got_ != (want)) {                                                                                          \
            failures++;                                                                                                \
            fprintf(stderr, "%s:%d: %s gave %s, want %s\n", __FILE__, __LINE__, #expr, name(got_), name(want));     \
        }                                                                                                              \
    } while (0)

#endif /* TTEXT_TEST_CHECK_H */
