/*
 * tt_ntp.h - the kernel's NTP state, read with ntp_adjtime(modes = 0).
 */
#ifndef TT_NTP_H
#define TT_NTP_H

#include <stdint.h>

/* cdef-begin */
struct tt_ntp_state {
	int32_t clock_state;  /* ntp_adjtime's return: TIME_OK .. TIME_ERROR */
	int32_t status;       /* STA_* bits; STA_UNSYNC = 0x0040 */
	int64_t maxerror_us;  /* kernel's maximum error bound, microseconds */
	int64_t esterror_us;  /* kernel's estimated error, microseconds */
	int64_t offset;       /* last phase offset (ns if STA_NANO, else us) */
	int64_t freq;         /* frequency offset, scaled ppm (<< 16) */
	int32_t tai_s;        /* TAI - UTC offset the kernel holds, seconds */
	int32_t reserved;
};

/* Reads the NTP state without changing anything (modes = 0, no privilege
 * needed). Returns 0 or -errno. */
int tt_ntp_read(struct tt_ntp_state *out);
/* cdef-end */

#endif
