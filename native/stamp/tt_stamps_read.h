/*
 * tt_stamps_read.h - the C reference decoder of the tempotrace.stamps text
 * (native/ttext/stamps.c, spec/semantic-conventions.md section 1.4) bound for
 * Python in one call per span, for the span table's writer
 * (tempotrace_sdk/analysis/parquet_rows.py).
 *
 * The result is flat integers, not a struct: from Python, unpacking one
 * int64 array is cheaper than reading a struct's fields one by one.  The
 * decoder is the conformance-checked one, so this reads a text exactly as
 * stamptext.decode does (tests/analysis/test_parquet_stamps.py
 * compares the two).
 *
 * Everything between the cdef markers is also the cffi cdef.
 */
#ifndef TT_STAMPS_READ_H
#define TT_STAMPS_READ_H

#include <stddef.h>
#include <stdint.h>

/* cdef-begin */
/* Slots of tt_stamps_read's out[] (TT_STAMPS_SLOTS of them). */
enum {
	TT_ST_STATUS = 0,  /* ttst_status: 0 decoded; else the rule broken (nothing else is set) */
	TT_ST_SOURCE,      /* the start's ts_source */
	TT_ST_START,       /* 4 slots: ptp_ns, uncertainty_ns, clk_quality, lts */
	TT_ST_HAS_END = 6, /* 1 when an end was decoded, then 4 slots as the start's */
	TT_ST_END,
	TT_ST_HAS_REMOTE = 11, /* 1 when a receive was decoded, then ptp_ns, uncertainty_ns, clk_quality,
	                          ts_source, tenant_id, lts, merged (0/1), recv_lts */
	TT_ST_REMOTE,
	TT_ST_HAS_SKETCH = 20, /* 1 when sketch[] holds the 32 sketch bytes */
	TT_ST_SENDS,           /* the sends written to sends[] (4 slots each: lts, ptp_ns, uncertainty_ns, clk_quality) */
	TT_STAMPS_SLOTS
};

/* Statuses beyond ttst_status's (which ends at TTST_E_CAPACITY = 10). */
enum {
	TT_ST_MORE_ROOM = 100, /* decoded, with more sends than sends_cap: out[TT_ST_SENDS] says how many */
	TT_ST_NO_MEMORY = 101  /* the decoder's room for a text of many sends could not be allocated */
};

/* Decode len bytes at text with the span's times and plain attributes (an
 * absent one: 65535 and 2; one present but out of range: any larger value,
 * which the decoder refuses).  out[] has TT_STAMPS_SLOTS slots, sketch[] 32
 * bytes, sends[] 4 int64 per reading for sends_cap readings.  Returns
 * out[TT_ST_STATUS]. */
int tt_stamps_read(const char *text, size_t len, uint64_t start_ns, uint64_t end_ns, uint32_t uncertainty_ns,
                   uint32_t clk_quality, int64_t *out, uint8_t *sketch, int64_t *sends, size_t sends_cap);

/* A column of texts at once (the columnar analysis, spec/analysis.md section 5.6): text i is the bytes
 * data[offsets[i]..offsets[i+1]] (Arrow's string layout), decoded when bit i of present[] is set (LSB
 * first), as tt_stamps_read decodes it with start_ns[i], end_ns[i], uncertainty_ns[i], clk_quality[i],
 * into out[i * TT_STAMPS_SLOTS ...] and sketch[i * 32 ...]; a row not present gets out[TT_ST_STATUS] -1.
 * Every row's sends go one after another into sends[] (4 int64 a send), while there is room for
 * sends_cap; returns how many sends the column holds in all: more than sends_cap, call again with room
 * for them. A row whose decoder could not allocate has TT_ST_NO_MEMORY. */
size_t tt_stamps_read_column(const char *data, const int32_t *offsets, const uint8_t *present, size_t n,
                             const uint64_t *start_ns, const uint64_t *end_ns, const uint32_t *uncertainty_ns,
                             const uint32_t *clk_quality, int64_t *out, uint8_t *sketch, int64_t *sends,
                             size_t sends_cap);
/* cdef-end */

#endif
