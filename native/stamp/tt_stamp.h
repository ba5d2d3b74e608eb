/*
 * tt_stamp.h - the per-event work of the OpenTelemetry layer, in as few
 * calls from Python as the result allows.
 *
 * A span start is one call: read the configured clock through its cached
 * mapping, tick the process's Lamport counter atomically, hash the span id
 * into a copy of the parent's SVC sketch, and fill struct tt_event. A span
 * end or a send (inject) needs only two numbers, so it is two calls that
 * return them as plain integers (the mapped clock read and the tick): from
 * Python that is cheaper than one call filling a struct it must then unpack.
 * A receive (extract) is one call, the bounded merge. Nothing is allocated;
 * the caller owns *out. The pure-Python path (tempotrace_sdk/otel/stamp.py)
 * computes exactly the same values (tests/otel/test_otel_stamp.py compares
 * the two on random inputs).
 *
 * Everything between the cdef markers is also the cffi cdef.
 */
#ifndef TT_STAMP_H
#define TT_STAMP_H

#include <stdint.h>

/* cdef-begin */
/* A clock source's cached mapping from a raw POSIX clock to TAI, written by
 * the source whenever it refreshes its sync state (at most once a second).
 * A read takes clock_id and adds offset_ns; a raw reading outside
 * [valid_from_ns, valid_until_ns] means the mapping is stale (or the clock
 * stepped back) and the read refuses with -EAGAIN before anything else
 * happens, so the caller can refresh and retry. The other fields are the
 * caller's: they describe every reading the mapping gives. */
struct tt_clock_map {
	int clock_id;
	int64_t offset_ns;
	int64_t valid_from_ns;
	int64_t valid_until_ns;
	uint16_t uncertainty_ns;
	uint8_t ts_source;
	uint8_t clk_quality;
};

/* What a span start produced. saturated: 1 when the counter was already at
 * 2^63-1 and could not advance (the value stays there). */
struct tt_event {
	int64_t ptp_ns;
	int64_t lts;
	uint8_t saturated;
	uint8_t sketch[32];
};

/* A span start: the clock read through clock (NULL: the caller has taken the
 * reading itself, and out->ptp_ns is left alone), a Lamport tick, and
 * span_id added to a copy of sketch_in (32 bytes, or NULL for the empty
 * sketch) in out->sketch. Returns 0, or as tt_clock_mapped_ns for a failed
 * read (-EAGAIN, -ERANGE, -errno), or -EFAULT for NULL lamport/out. On any
 * error nothing was ticked. */
int tt_stamp_start(const struct tt_clock_map *clock, int64_t *lamport, const char *sketch_in, uint64_t span_id,
		   struct tt_event *out);

/* One reading through clock: clock_gettime(clock_id) + offset_ns, >= 0.
 * -EAGAIN when the raw reading is outside the validity window; -ERANGE when
 * the mapped time falls outside 0..2^63-1; -errno when the read fails;
 * -EFAULT for NULL. */
int64_t tt_clock_mapped_ns(const struct tt_clock_map *clock);

/* The mapping alone, for a raw reading given by the caller (no read, no
 * validity window): raw_ns + offset_ns, or -ERANGE outside 0..2^63-1. */
int64_t tt_clock_map_ns(const struct tt_clock_map *clock, int64_t raw_ns);

/* A local event on the counter: the new value, or -1 when it was already
 * saturated at 2^63-1 (it stays there). Atomic: no tick is ever lost. */
int64_t tt_lamport_tick(int64_t *lamport);

/* A receive of a header carrying remote (0..2^63-1; a negative one is treated
 * as 0), atomically, by tt-ext v3 §10 and §10.1: lts = max(local, remote) + 1,
 * except that a remote more than max_ahead (>= 0; < 0: no bound) ahead of
 * local is not merged and the receive is a plain local tick, lts = local + 1.
 * Returns, in one value (no output struct, so nothing to allocate, unpack or
 * share between threads):
 *   lts (>= 1)       merged;
 *   -1               the counter was saturated at 2^63-1 (it stays there);
 *                    a saturated counter is never behind a remote: merged;
 *   ~lts (<= -2)     not merged; the receive's value is ~result (bitwise not:
 *                    every lts 1..2^63-1 has one, down to INT64_MIN). */
int64_t tt_lamport_receive(int64_t *lamport, int64_t remote, int64_t max_ahead);
/* A traced op's record (tempotrace_sdk/torch/recorder.py, spec/torch.md §1.4)
 * written in place, in one call: the clock read through clock, a Lamport
 * tick, then the record's words as little-endian int64 at rec. The start is
 * 64 octets: number, facts | ts_source << 40 | clk_quality << 48, seq,
 * nbytes, root, ptp_ns, uncertainty_ns, lts; the end 32 octets: ptp_ns,
 * uncertainty_ns, lts, completion | ts_source << 8 | clk_quality << 16
 * (source, quality and bound: the mapping's). Returns 0; 1 when the counter
 * was saturated (lts written as 2^63-1); or as tt_clock_mapped_ns for a
 * failed read, and then nothing was ticked or written. */
int tt_oprec_start(const struct tt_clock_map *clock, int64_t *lamport, char *rec, int64_t number, int64_t facts,
		   int64_t seq, int64_t nbytes, int64_t root);
int tt_oprec_end(const struct tt_clock_map *clock, int64_t *lamport, char *rec, int64_t completion);
/* cdef-end */

#endif
