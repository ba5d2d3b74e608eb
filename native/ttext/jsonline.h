/*
 * jsonline.h -- the tiny JSON subset spoken by the conformance runner
 * (conformance/PROTOCOL.md): one flat object per line whose values are
 * strings or arrays of strings.  Numbers, nesting, true/false/null are
 * rejected: the protocol never sends them, and refusing keeps this parser
 * small enough to review.  String escapes (including \uXXXX surrogate pairs)
 * are decoded to UTF-8; a lone surrogate becomes its 3-byte (WTF-8) form so
 * that every JSON string maps to some byte string, as the runner's
 * Unicode inputs require.  Decoded strings may contain NUL: always use the
 * lengths.
 */
#ifndef TTEXT_JSONLINE_H
#define TTEXT_JSONLINE_H

#include <stddef.h>
#include <stdio.h>

#define JL_MAX_FIELDS 32

typedef struct jl_str {
    const char *ptr; /* into the object's arena; NUL-terminated for convenience */
    size_t len;      /* decoded length in bytes (may contain NUL bytes) */
} jl_str;

typedef struct jl_field {
    jl_str key;
    int is_array; /* 0: value is a string; 1: items[] */
    jl_str value;
    jl_str *items;
    size_t n_items;
} jl_field;

typedef struct jl_object {
    jl_field fields[JL_MAX_FIELDS];
    size_t n_fields;
    char *arena; /* decoded strings; owned */
} jl_object;

/*
 * Parse len bytes at line (need not be NUL-terminated) into obj.  Returns 0
 * on success; otherwise -1 with *err set to a static message, and obj left
 * empty (nothing to free).  On success release with jl_free().
 */
int jl_parse(const char *line, size_t len, jl_object *obj, const char **err);

/* Release what jl_parse() allocated; obj may then be reused. */
void jl_free(jl_object *obj);

/* The field named key (NUL-terminated), or NULL.  Duplicate keys are rejected by jl_parse(). */
const jl_field *jl_get(const jl_object *obj, const char *key);

/* Write len bytes at s as a JSON string literal (quotes included, control
 * characters, quote and backslash escaped, other bytes verbatim). */
void jl_write_string(FILE *out, const char *s, size_t len);

#endif /* TTEXT_JSONLINE_H */
