/*
 * tt_stamp.h - the per-event work of the OpenTelemetry layer in one call.
 *
 * One span start, span end, send (inject) or receive (extract) is one call:
 * read the configured clock through its cached mapping, tick or merge the
 * process's Lamport counter atomically, hash a span id into a copy of the
 * parent's SVC sketch, and fill the numbers the processor writes. Nothing is
 * allocated; the caller owns *out. The pure-Python path
 * (tempotrace_sdk/otel/stamp.py) computes exactly the same values
 * (tests/otel/test_otel_stamp.py compares the two on random inputs).
 *
 * Everything between the cdef markers is also the cffi cdef.
 */
#ifndef TT_STAMP_H
#define TT_STAMP_H

#include <stdint.h>

/* cdef-begin */
/* A clock source's cached mapping from a raw POSIX clock to TAI, written by
 * the source whenever it refreshes its sync state (at most once a second).
 * The event reads clock_id and adds offset_ns; a raw reading outside
 * [valid_from_ns, valid_until_ns] means the mapping is stale (or the clock
 * stepped back) and the event refuses with -EAGAIN before touching anything,
 * so the caller can refresh and retry. */
struct tt_clock_map {
	int clock_id;
	int64_t offset_ns;
	int64_t valid_from_ns;
	int64_t valid_until_ns;
	uint16_t uncertainty_ns;
	uint8_t ts_source;
	uint8_t clk_quality;
};

/* What one event produced. merged: 1 unless a receive was refused for being
 * more than max_ahead ahead; saturated: 1 when the counter was already at
 * 2^63-1 and could not advance (the value stays there). */
struct tt_event {
	int64_t ptp_ns;
	int64_t lts;
	uint16_t uncertainty_ns;
	uint8_t ts_source;
	uint8_t clk_quality;
	uint8_t merged;
	uint8_t saturated;
	uint8_t sketch[32];
};

/* Event parts, combined with |: read the clock, tick the counter or merge
 * remote_lts into it (one of the two), add span_id to the sketch; or leave
 * out->sketch alone (KEEP_SKETCH: the caller reads no sketch). */
enum { TT_EV_READ_CLOCK = 1, TT_EV_TICK = 2, TT_EV_MERGE = 4, TT_EV_ADD_SPAN = 8, TT_EV_KEEP_SKETCH = 16 };

/* One event (see above). sketch_in: 32 bytes, or NULL for the empty sketch;
 * the result is always written to out->sketch (a copy when no span is added).
 * max_ahead < 0: merge without bound (lts = max(local, remote) + 1).
 * Returns 0; -EAGAIN when the mapping is stale; -ERANGE when the mapped time
 * falls outside 0..2^63-1; -errno when the clock read fails; -EINVAL for a
 * bad flag combination or a negative remote_lts; -EFAULT for NULL pointers.
 * On any error nothing was ticked. */
int tt_stamp_event(const struct tt_clock_map *clock, int64_t *lamport, int64_t remote_lts, int64_t max_ahead,
		   const char *sketch_in, uint64_t span_id, int flags, struct tt_event *out);

/* The two common events, with fewer arguments (each costs a conversion per
 * call from Python): a span start (clock through the mapping, tick, span_id
 * added to a copy of sketch_in, 32 bytes or NULL) and a span end or send
 * (clock, tick; out->sketch untouched). Returns as tt_stamp_event. */
int tt_stamp_start(const struct tt_clock_map *clock, int64_t *lamport, const char *sketch_in, uint64_t span_id,
		   struct tt_event *out);
int tt_stamp_tick(const struct tt_clock_map *clock, int64_t *lamport, struct tt_event *out);

/* A local event on the counter: the new value, or -1 when it was already
 * saturated at 2^63-1 (it stays there). Atomic: no tick is ever lost. */
int64_t tt_lamport_tick(int64_t *lamport);

/* A receive whose caller needs only the value (tt_stamp_event with
 * TT_EV_MERGE also says whether it merged): lts = max(local, remote) + 1, or
 * local + 1 when remote is more than max_ahead (>= 0) ahead; atomically. The
 * new value, or -1 when the counter was saturated at 2^63-1 (it stays
 * there). remote must be 0..2^63-1 (a negative one is treated as 0). */
int64_t tt_lamport_merge(int64_t *lamport, int64_t remote, int64_t max_ahead);

/* Map a raw reading through clock (no read, no validity window): for the
 * differential test. Returns 0 or -ERANGE. */
int tt_stamp_map(const struct tt_clock_map *clock, int64_t raw_ns, struct tt_event *out);
/* cdef-end */

#endif
