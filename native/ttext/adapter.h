/*
 * adapter.h -- what adapter.c shares with the files that answer more ops
 * (adapter_stamps.c): the response writer, request field access and the
 * protocol problem of the current request (conformance/PROTOCOL.md).
 */
#ifndef TTEXT_ADAPTER_H
#define TTEXT_ADAPTER_H

#include <stddef.h>
#include <stdint.h>

#include "jsonline.h"

/* Response: begin(req) writes '{' and the request's id; key()/put_str() add fields; end() closes and flushes. */
void begin(const jl_object *req);
void key(const char *k);
void put_str(const char *k, const char *v);
void end(void);

/* The protocol problem of the current request (first one wins); an op that sets it writes no response. */
extern const char *problem;

/* A string / array field, or NULL with problem set. */
const jl_str *get_str(const jl_object *req, const char *k);
const jl_field *get_list(const jl_object *req, const char *k);

/* Hex into a fresh malloc'd buffer of exactly the decoded length, or NULL with problem set. */
uint8_t *from_hex(const jl_str *s, size_t *n);

/* A decimal integer string -> sign and magnitude; *overflow when |v| >= 2^64.  0, or -1 with problem set. */
int parse_dec(const jl_str *s, int *negative, uint64_t *mag, int *overflow);

/* The stamps ops (adapter_stamps.c). */
void op_decode_stamps(const jl_object *req);
void op_encode_stamps(const jl_object *req);

#endif /* TTEXT_ADAPTER_H */
