/* jsonline.c -- flat JSON object parser for the runner protocol (see jsonline.h). */
#include "jsonline.h"

#include <stdlib.h>
#include <string.h>

/* Parser state: a cursor over [p, end) and an arena write position. */
typedef struct parser {
    const unsigned char *p;
    const unsigned char *end;
    char *out; /* next free byte of the arena */
    const char *err;
} parser;

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static int fail(parser *ps, const char *msg)
{
    if (ps->err == NULL)
        ps->err = msg;
    return -1;
}

static int hex4(parser *ps, unsigned *v)
{
    int i;
    *v = 0;
    if (ps->end - ps->p < 4)
        return fail(ps, "truncated \\u escape");
    for (i = 0; i < 4; i++) {
        unsigned char c = ps->p[i];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10u;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10u;
        else
            return fail(ps, "bad hex digit in \\u escape");
        *v = (*v << 4) | d;
    }
    ps->p += 4;
    return 0;
}

/* Append code point cp as UTF-8 (surrogates as 3 bytes, WTF-8). The arena
 * holds at least as many bytes as the input, and every escape is at least as
 * long in the input as its UTF-8 form, so this cannot overflow. */
static void put_utf8(parser *ps, unsigned long cp)
{
    char *o = ps->out;
    if (cp < 0x80) {
        *o++ = (char)cp;
    } else if (cp < 0x800) {
        *o++ = (char)(0xC0 | (cp >> 6));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *o++ = (char)(0xE0 | (cp >> 12));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *o++ = (char)(0xF0 | (cp >> 18));
        *o++ = (char)(0x80 | ((cp >> 12) & 0x3F));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    }
    ps->out = o;
}

/* Parse a string literal at the cursor into the arena. */
static int parse_string(parser *ps, jl_str *s)
{
    char *start = ps->out;

    if (ps->p >= ps->end || *ps->p != '"')
        return fail(ps, "expected a string");
    ps->p++;
    for (;;) {
        unsigned char c;
        if (ps->p >= ps->end)
            return fail(ps, "unterminated string");
        c = *ps->p++;
        if (c == '"')
            break;
        if (c < 0x20)
            return fail(ps, "raw control character in string");
        if (c != '\\') {
            *ps->out++ = (char)c; /* bytes >= 0x80 pass through as UTF-8 */
            continue;
        }
        if (ps->p >= ps->end)
            return fail(ps, "truncated escape");
        c = *ps->p++;
        switch (c) {
        case '"': *ps->out++ = '"'; break;
        case '\\': *ps->out++ = '\\'; break;
        case '/': *ps->out++ = '/'; break;
        case 'b': *ps->out++ = '\b'; break;
        case 'f': *ps->out++ = '\f'; break;
        case 'n': *ps->out++ = '\n'; break;
        case 'r': *ps->out++ = '\r'; break;
        case 't': *ps->out++ = '\t'; break;
        case 'u': {
            unsigned hi, lo;
            if (hex4(ps, &hi) != 0)
                return -1;
            /* A high surrogate followed by an escaped low one is one code point. */
            if (hi >= 0xD800 && hi <= 0xDBFF && ps->end - ps->p >= 6 && ps->p[0] == '\\' && ps->p[1] == 'u') {
                const unsigned char *save = ps->p;
                ps->p += 2;
                if (hex4(ps, &lo) != 0)
                    return -1;
                if (lo >= 0xDC00 && lo <= 0xDFFF) {
                    put_utf8(ps, 0x10000UL + (((unsigned long)hi - 0xD800) << 10) + (lo - 0xDC00));
                    break;
                }
                ps->p = save; /* not a pair: emit hi alone, re-read the next escape */
            }
            put_utf8(ps, hi);
            break;
        }
        default:
            return fail(ps, "unknown escape");
        }
    }
    s->ptr = start;
    s->len = (size_t)(ps->out - start);
    *ps->out++ = '\0';
    return 0;
}

static int parse_array(parser *ps, jl_field *f)
{
    size_t cap = 0;

    ps->p++; /* '[' */
    f->is_array = 1;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
        return 0;
    }
    for (;;) {
        skip_ws(ps);
        if (f->n_items == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            jl_str *n = (jl_str *)realloc(f->items, ncap * sizeof *n);
            if (n == NULL)
                return fail(ps, "out of memory");
            f->items = n;
            cap = ncap;
        }
        if (parse_string(ps, &f->items[f->n_items]) != 0)
            return -1;
        f->n_items++;
        skip_ws(ps);
        if (ps->p >= ps->end)
            return fail(ps, "unterminated array");
        if (*ps->p == ']') {
            ps->p++;
            return 0;
        }
        if (*ps->p != ',')
            return fail(ps, "expected ',' or ']' in array");
        ps->p++;
    }
}

void jl_free(jl_object *obj)
{
    size_t i;
    for (i = 0; i < obj->n_fields; i++)
        free(obj->fields[i].items);
    free(obj->arena);
    memset(obj, 0, sizeof *obj);
}

static int keys_equal(const jl_str *a, const jl_str *b)
{
    return a->len == b->len && memcmp(a->ptr, b->ptr, a->len) == 0;
}

int jl_parse(const char *line, size_t len, jl_object *obj, const char **err)
{
    parser ps;
    size_t i;

    memset(obj, 0, sizeof *obj);
    obj->arena = (char *)malloc(len + 1); /* decoded text never outgrows its source */
    if (obj->arena == NULL) {
        *err = "out of memory";
        return -1;
    }
    ps.p = (const unsigned char *)line;
    ps.end = ps.p + len;
    ps.out = obj->arena;
    ps.err = NULL;

    skip_ws(&ps);
    if (ps.p >= ps.end || *ps.p != '{') {
        fail(&ps, "expected '{'");
        goto bad;
    }
    ps.p++;
    skip_ws(&ps);
    if (ps.p < ps.end && *ps.p == '}') {
        ps.p++;
    } else {
        for (;;) {
            jl_field *f;
            skip_ws(&ps);
            if (obj->n_fields == JL_MAX_FIELDS) {
                fail(&ps, "too many fields");
                goto bad;
            }
            f = &obj->fields[obj->n_fields++];
            if (parse_string(&ps, &f->key) != 0)
                goto bad;
            for (i = 0; i + 1 < obj->n_fields; i++)
                if (keys_equal(&obj->fields[i].key, &f->key)) {
                    fail(&ps, "duplicate key");
                    goto bad;
                }
            skip_ws(&ps);
            if (ps.p >= ps.end || *ps.p != ':') {
                fail(&ps, "expected ':'");
                goto bad;
            }
            ps.p++;
            skip_ws(&ps);
            if (ps.p < ps.end && *ps.p == '[') {
                if (parse_array(&ps, f) != 0)
                    goto bad;
            } else if (parse_string(&ps, &f->value) != 0) {
                fail(&ps, "values must be strings or arrays of strings");
                goto bad;
            }
            skip_ws(&ps);
            if (ps.p >= ps.end) {
                fail(&ps, "unterminated object");
                goto bad;
            }
            if (*ps.p == '}') {
                ps.p++;
                break;
            }
            if (*ps.p != ',') {
                fail(&ps, "expected ',' or '}'");
                goto bad;
            }
            ps.p++;
        }
    }
    skip_ws(&ps);
    if (ps.p != ps.end) {
        fail(&ps, "trailing data after object");
        goto bad;
    }
    return 0;
bad:
    *err = ps.err;
    jl_free(obj);
    return -1;
}

const jl_field *jl_get(const jl_object *obj, const char *key)
{
    size_t i, n = strlen(key);
    for (i = 0; i < obj->n_fields; i++)
        if (obj->fields[i].key.len == n && memcmp(obj->fields[i].key.ptr, key, n) == 0)
            return &obj->fields[i];
    return NULL;
}

void jl_write_string(FILE *out, const char *s, size_t len)
{
    size_t i;
    fputc('"', out);
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20 || c == 0x7F)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}
