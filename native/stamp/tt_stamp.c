/* tt_stamp.c - the per-event work in one call (see tt_stamp.h). */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "murmur3.h"
#include "tt_stamp.h"

/* tt-ext v3 §3.6, §10: the counter saturates here instead of wrapping. */
#define TT_LTS_MAX INT64_MAX
/* §8: a 256-bit Bloom filter, k = 4, MurmurHash3_x64_128 with seed 0 over the
 * 8-byte big-endian span id; bit i_k = (h1 + k*h2) mod 256, bit j lives in
 * byte j/8 under mask 0x80 >> (j%8). */
#define TT_SKETCH_BYTES 32
#define TT_SKETCH_K 4

static void add_span(uint8_t sketch[TT_SKETCH_BYTES], uint64_t span_id)
{
	uint8_t key[8];
	uint64_t h[2];
	int i, k;

	for (i = 0; i < 8; i++)
		key[i] = (uint8_t)(span_id >> (56 - 8 * i));
	ttext_murmur3_x64_128(key, sizeof(key), 0, h);
	for (k = 0; k < TT_SKETCH_K; k++) {
		unsigned bit = (unsigned)((h[0] + (uint64_t)k * h[1]) & 0xFF);

		sketch[bit >> 3] |= (uint8_t)(0x80u >> (bit & 7));
	}
}

int64_t tt_lamport_tick(int64_t *lamport)
{
	int64_t old = __atomic_load_n(lamport, __ATOMIC_RELAXED);

	do {
		if (old >= TT_LTS_MAX) {
			__atomic_store_n(lamport, TT_LTS_MAX, __ATOMIC_RELAXED);
			return -1;
		}
	} while (!__atomic_compare_exchange_n(lamport, &old, old + 1, 1, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
	return old + 1;
}

/* lts = max(local, remote) + 1, or local + 1 when remote is more than
 * max_ahead (>= 0) ahead of local; *merged says which. -1: saturated. */
static int64_t receive(int64_t *lamport, int64_t remote, int64_t max_ahead, uint8_t *merged)
{
	int64_t old = __atomic_load_n(lamport, __ATOMIC_RELAXED), base;

	do {
		*merged = !(max_ahead >= 0 && remote > old && remote - old > max_ahead);
		base = (*merged && remote > old) ? remote : old;
		if (base >= TT_LTS_MAX) {
			__atomic_store_n(lamport, TT_LTS_MAX, __ATOMIC_RELAXED);
			return -1;
		}
	} while (!__atomic_compare_exchange_n(lamport, &old, base + 1, 1, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
	return base + 1;
}

int64_t tt_lamport_merge(int64_t *lamport, int64_t remote, int64_t max_ahead)
{
	uint8_t merged;

	return receive(lamport, remote < 0 ? 0 : remote, max_ahead, &merged);
}

int tt_stamp_map(const struct tt_clock_map *clock, int64_t raw_ns, struct tt_event *out)
{
	int64_t ptp;

	if (!clock || !out)
		return -EFAULT;
	if (__builtin_add_overflow(raw_ns, clock->offset_ns, &ptp) || ptp < 0)
		return -ERANGE;
	out->ptp_ns = ptp;
	out->uncertainty_ns = clock->uncertainty_ns;
	out->ts_source = clock->ts_source;
	out->clk_quality = clock->clk_quality;
	return 0;
}

int tt_stamp_start(const struct tt_clock_map *clock, int64_t *lamport, const char *sketch_in, uint64_t span_id,
		   struct tt_event *out)
{
	return tt_stamp_event(clock, lamport, 0, -1, sketch_in, span_id, TT_EV_READ_CLOCK | TT_EV_TICK | TT_EV_ADD_SPAN,
			      out);
}

int tt_stamp_tick(const struct tt_clock_map *clock, int64_t *lamport, struct tt_event *out)
{
	return tt_stamp_event(clock, lamport, 0, -1, NULL, 0, TT_EV_READ_CLOCK | TT_EV_TICK | TT_EV_KEEP_SKETCH, out);
}

int tt_stamp_event(const struct tt_clock_map *clock, int64_t *lamport, int64_t remote_lts, int64_t max_ahead,
		   const char *sketch_in, uint64_t span_id, int flags, struct tt_event *out)
{
	int64_t lts = 0;

	if (!out || ((flags & (TT_EV_TICK | TT_EV_MERGE)) && !lamport))
		return -EFAULT;
	if ((flags & TT_EV_TICK) && (flags & TT_EV_MERGE))
		return -EINVAL;
	if ((flags & TT_EV_MERGE) && remote_lts < 0)
		return -EINVAL;
	if (flags & TT_EV_READ_CLOCK) {
		struct timespec ts;
		int64_t raw;
		int rc;

		if (!clock)
			return -EFAULT;
		if (clock_gettime((clockid_t)clock->clock_id, &ts))
			return -errno;
		raw = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
		if (raw < clock->valid_from_ns || raw > clock->valid_until_ns)
			return -EAGAIN;
		rc = tt_stamp_map(clock, raw, out);
		if (rc)
			return rc;
	}
	out->merged = 1;
	out->saturated = 0;
	if (flags & TT_EV_TICK)
		lts = tt_lamport_tick(lamport);
	else if (flags & TT_EV_MERGE)
		lts = receive(lamport, remote_lts, max_ahead, &out->merged);
	if (lts < 0) {
		out->saturated = 1;
		lts = TT_LTS_MAX;
	}
	out->lts = lts;
	if (flags & TT_EV_KEEP_SKETCH)
		return 0;
	if (sketch_in)
		memcpy(out->sketch, sketch_in, TT_SKETCH_BYTES);
	else
		memset(out->sketch, 0, TT_SKETCH_BYTES);
	if (flags & TT_EV_ADD_SPAN)
		add_span(out->sketch, span_id);
	return 0;
}
