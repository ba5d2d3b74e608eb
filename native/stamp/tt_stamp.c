/* tt_stamp.c - the per-event work of the OpenTelemetry layer (see tt_stamp.h). */
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

int64_t tt_lamport_receive(int64_t *lamport, int64_t remote, int64_t max_ahead)
{
	int64_t old = __atomic_load_n(lamport, __ATOMIC_RELAXED), base;
	int merged;

	if (remote < 0)
		remote = 0;
	do {
		/* remote - old cannot overflow: remote > old >= 0 where it is taken. */
		merged = !(max_ahead >= 0 && remote > old && remote - old > max_ahead);
		base = (merged && remote > old) ? remote : old;
		if (base >= TT_LTS_MAX) {
			__atomic_store_n(lamport, TT_LTS_MAX, __ATOMIC_RELAXED);
			return -1;
		}
	} while (!__atomic_compare_exchange_n(lamport, &old, base + 1, 1, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
	return merged ? base + 1 : ~(base + 1);
}

int64_t tt_clock_map_ns(const struct tt_clock_map *clock, int64_t raw_ns)
{
	int64_t ptp;

	if (!clock)
		return -EFAULT;
	if (__builtin_add_overflow(raw_ns, clock->offset_ns, &ptp) || ptp < 0)
		return -ERANGE;
	return ptp;
}

int64_t tt_clock_mapped_ns(const struct tt_clock_map *clock)
{
	struct timespec ts;
	int64_t raw;

	if (!clock)
		return -EFAULT;
	if (clock_gettime((clockid_t)clock->clock_id, &ts))
		return -errno;
	raw = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
	if (raw < clock->valid_from_ns || raw > clock->valid_until_ns)
		return -EAGAIN;
	return tt_clock_map_ns(clock, raw);
}

int tt_stamp_start(const struct tt_clock_map *clock, int64_t *lamport, const char *sketch_in, uint64_t span_id,
		   struct tt_event *out)
{
	int64_t lts;

	if (!lamport || !out)
		return -EFAULT;
	if (clock) {
		int64_t ptp = tt_clock_mapped_ns(clock);

		if (ptp < 0)
			return (int)ptp;
		out->ptp_ns = ptp;
	}
	lts = tt_lamport_tick(lamport);
	out->saturated = lts < 0;
	out->lts = lts < 0 ? TT_LTS_MAX : lts;
	if (sketch_in)
		memcpy(out->sketch, sketch_in, TT_SKETCH_BYTES);
	else
		memset(out->sketch, 0, TT_SKETCH_BYTES);
	add_span(out->sketch, span_id);
	return 0;
}

/* Little-endian whatever the host, as the Python side's struct "<q" reads it. */
static void put_le64(char *at, int64_t value)
{
	uint64_t v = (uint64_t)value;
	int i;

	for (i = 0; i < 8; i++)
		at[i] = (char)(v >> (8 * i));
}

/* The reading and its tick for a record at rec, or the read's error (nothing ticked). */
static int oprec_reading(const struct tt_clock_map *clock, int64_t *lamport, const char *rec, int64_t *ptp,
			 int64_t *lts)
{
	if (!clock || !lamport || !rec)
		return -EFAULT;
	*ptp = tt_clock_mapped_ns(clock);
	if (*ptp < 0)
		return (int)*ptp;
	*lts = tt_lamport_tick(lamport);
	if (*lts < 0) {
		*lts = TT_LTS_MAX;
		return 1;
	}
	return 0;
}

int tt_oprec_start(const struct tt_clock_map *clock, int64_t *lamport, char *rec, int64_t number, int64_t facts,
		   int64_t seq, int64_t nbytes, int64_t root)
{
	int64_t ptp, lts;
	int rc;

	rc = oprec_reading(clock, lamport, rec, &ptp, &lts);
	if (rc < 0)
		return rc;
	put_le64(rec, number);
	put_le64(rec + 8, facts | ((int64_t)clock->ts_source << 40) | ((int64_t)clock->clk_quality << 48));
	put_le64(rec + 16, seq);
	put_le64(rec + 24, nbytes);
	put_le64(rec + 32, root);
	put_le64(rec + 40, ptp);
	put_le64(rec + 48, clock->uncertainty_ns);
	put_le64(rec + 56, lts);
	return rc;
}

int tt_oprec_end(const struct tt_clock_map *clock, int64_t *lamport, char *rec, int64_t completion)
{
	int64_t ptp, lts;
	int rc;

	rc = oprec_reading(clock, lamport, rec, &ptp, &lts);
	if (rc < 0)
		return rc;
	put_le64(rec, ptp);
	put_le64(rec + 8, clock->uncertainty_ns);
	put_le64(rec + 16, lts);
	put_le64(rec + 24, completion | ((int64_t)clock->ts_source << 8) | ((int64_t)clock->clk_quality << 16));
	return rc;
}
