/* tt_stamps_read.c - see tt_stamps_read.h. */
#include "tt_stamps_read.h"

#include <stdlib.h>
#include <string.h>

#include "stamps.h"

static void put_reading(int64_t *out, const ttst_reading *r)
{
	out[0] = r->ptp_ns;
	out[1] = (int64_t)r->uncertainty_ns;
	out[2] = (int64_t)r->clk_quality;
	out[3] = r->lts;
}

int tt_stamps_read(const char *text, size_t len, uint64_t start_ns, uint64_t end_ns, uint32_t uncertainty_ns,
                   uint32_t clk_quality, int64_t *out, uint8_t *sketch, int64_t *sends, size_t sends_cap)
{
	enum { LOCAL_SENDS = 16 };
	ttst_reading local[LOCAL_SENDS];
	ttst_reading *readings = local;
	size_t room = ttst_count_sends(text, len), i;
	ttst_stamps st;
	ttst_status status;

	memset(out, 0, sizeof(int64_t) * TT_STAMPS_SLOTS);
	/* Room for every send the text can decode to, so that the status is the text's own rule, never
	 * TTST_E_CAPACITY (a text over TTST_MAX_SENDS is refused by the count, before any send is read). */
	if (room > TTST_MAX_SENDS)
		room = TTST_MAX_SENDS;
	if (room > LOCAL_SENDS) {
		readings = malloc(sizeof(ttst_reading) * room);
		if (readings == NULL) {
			out[TT_ST_STATUS] = TT_ST_NO_MEMORY;
			return TT_ST_NO_MEMORY;
		}
	} else {
		room = LOCAL_SENDS;
	}
	status = ttst_decode(text, len, start_ns, end_ns, uncertainty_ns, clk_quality, &st, readings, room);
	out[TT_ST_STATUS] = status;
	if (status == TTST_OK) {
		out[TT_ST_SOURCE] = st.ts_source;
		put_reading(out + TT_ST_START, &st.start);
		if (st.has_end) {
			out[TT_ST_HAS_END] = 1;
			put_reading(out + TT_ST_END, &st.end);
		}
		if (st.has_remote) {
			int64_t *r = out + TT_ST_REMOTE; /* in the columns' order (spec/parquet.md section 2.3) */
			out[TT_ST_HAS_REMOTE] = 1;
			r[0] = st.remote.header.ptp_ns;
			r[1] = (int64_t)st.remote.header.uncertainty_ns;
			r[2] = (int64_t)st.remote.header.clk_quality;
			r[3] = (int64_t)st.remote.ts_source;
			r[4] = (int64_t)st.remote.tenant_id;
			r[5] = st.remote.header.lts;
			r[6] = st.remote.merged != 0;
			r[7] = st.remote.merged ? st.remote.recv_lts : 0;
		}
		if (st.has_sketch) {
			out[TT_ST_HAS_SKETCH] = 1;
			memcpy(sketch, st.sketch, TTST_SKETCH_BYTES);
		}
		out[TT_ST_SENDS] = (int64_t)st.n_sends;
		if (st.n_sends > sends_cap) {
			out[TT_ST_STATUS] = TT_ST_MORE_ROOM; /* decoded: the caller asks again with room for them */
		} else {
			for (i = 0; i < st.n_sends; i++) {
				sends[4 * i] = st.sends[i].lts;
				sends[4 * i + 1] = st.sends[i].ptp_ns;
				sends[4 * i + 2] = (int64_t)st.sends[i].uncertainty_ns;
				sends[4 * i + 3] = (int64_t)st.sends[i].clk_quality;
			}
		}
	}
	if (readings != local)
		free(readings);
	return (int)out[TT_ST_STATUS];
}

size_t tt_stamps_read_column(const char *data, const int32_t *offsets, const uint8_t *present, size_t n,
                             const uint64_t *start_ns, const uint64_t *end_ns, const uint32_t *uncertainty_ns,
                             const uint32_t *clk_quality, int64_t *out, uint8_t *sketch, int64_t *sends,
                             size_t sends_cap)
{
	size_t total = 0, i;

	for (i = 0; i < n; i++) {
		int64_t *row = out + i * TT_STAMPS_SLOTS;
		size_t room = total < sends_cap ? sends_cap - total : 0;

		if (!((present[i / 8] >> (i % 8)) & 1)) {
			memset(row, 0, sizeof(int64_t) * TT_STAMPS_SLOTS);
			row[TT_ST_STATUS] = -1;
			continue;
		}
		tt_stamps_read(data + offsets[i], (size_t)(offsets[i + 1] - offsets[i]), start_ns[i], end_ns[i],
		               uncertainty_ns[i], clk_quality[i], row, sketch + 32 * i, sends + 4 * (total < sends_cap ? total : 0),
		               room);
		if (row[TT_ST_STATUS] == TTST_OK || row[TT_ST_STATUS] == TT_ST_MORE_ROOM)
			total += (size_t)row[TT_ST_SENDS];
	}
	return total;
}
