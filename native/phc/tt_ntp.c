/* tt_ntp.c - ntp_adjtime(modes = 0) (see tt_ntp.h). */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/timex.h>

#include "tt_ntp.h"

/* Python (kernel.py) hard-codes these bit values; fail the build if the
 * headers ever disagree. */
_Static_assert(STA_UNSYNC == 0x0040, "STA_UNSYNC moved");
_Static_assert(STA_CLOCKERR == 0x1000, "STA_CLOCKERR moved");
_Static_assert(TIME_ERROR == 5, "TIME_ERROR moved");
/* The pure-Python fallback mirrors struct timex with ctypes; check the
 * layout it assumes (uapi <linux/timex.h>, LP64: 208 bytes, tai at 160). */
_Static_assert(sizeof(long) != 8 || sizeof(struct timex) == 208, "struct timex size differs from uapi");
_Static_assert(sizeof(long) != 8 || offsetof(struct timex, tai) == 160, "struct timex tai offset differs");
_Static_assert(offsetof(struct timex, modes) == 0, "struct timex modes not first");

int tt_ntp_read(struct tt_ntp_state *out)
{
	struct timex tx;
	int state;

	if (!out)
		return -EFAULT;
	memset(&tx, 0, sizeof(tx)); /* modes = 0: read only */
	memset(out, 0, sizeof(*out));
	state = ntp_adjtime(&tx);
	if (state < 0)
		return -errno;
	out->clock_state = state;
	out->status = tx.status;
	out->maxerror_us = tx.maxerror;
	out->esterror_us = tx.esterror;
	out->offset = tx.offset;
	out->freq = tx.freq;
	out->tai_s = tx.tai;
	return 0;
}
