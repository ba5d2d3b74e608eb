/*
 * tt_sysoff.h - reading a PHC against the system clock, the way linuxptp's
 * sysoff.c does: probe PTP_SYS_OFFSET_PRECISE -> _EXTENDED -> PTP_SYS_OFFSET
 * once, then take N samples and keep the narrowest system-clock sandwich.
 *
 * Every method turns its ioctl result into an array of tt_sample and hands
 * it to tt_sysoff_select, so replayed (recorded) arrays exercise exactly the
 * code real reads use.
 */
#ifndef TT_SYSOFF_H
#define TT_SYSOFF_H

#include <stdint.h>

/* cdef-begin */
enum {
	TT_METHOD_NONE = 0,
	TT_METHOD_PRECISE = 1,       /* PTP_SYS_OFFSET_PRECISE: hardware cross-timestamp */
	TT_METHOD_EXTENDED = 2,      /* PTP_SYS_OFFSET_EXTENDED: [sys, phc, sys] triples */
	TT_METHOD_BASIC = 3,         /* PTP_SYS_OFFSET: interleaved sys, phc, ..., sys */
	TT_METHOD_CLOCK_GETTIME = 4  /* clock_gettime(FD_TO_CLOCKID) between two CLOCK_REALTIME reads */
};
enum { TT_MAX_SAMPLES = 25, TT_DEFAULT_SAMPLES = 5 };

/* One measurement: system (CLOCK_REALTIME) before, PHC, system after, ns. */
struct tt_sample {
	int64_t sys_before_ns;
	int64_t phc_ns;
	int64_t sys_after_ns;
};

/* The kept measurement. sys_ns is the sandwich midpoint; width_ns is
 * sys_after - sys_before (0 for PRECISE cross-timestamps). */
struct tt_reading {
	int64_t phc_ns;
	int64_t sys_ns;
	int64_t width_ns;
	int32_t method;
	int32_t samples;   /* how many samples were considered */
};

/* Keeps the sample with the narrowest sandwich (earliest on ties), skipping
 * samples whose after < before (the system clock stepped) or whose width
 * overflows int64 (garbage). Returns 0,
 * -EINVAL if n is not 1..TT_MAX_SAMPLES, -EAGAIN if no sample is valid. */
int tt_sysoff_select(const struct tt_sample *samples, int n, int method, struct tt_reading *out);

/* Finds the best method this fd supports, trying PRECISE, EXTENDED, BASIC,
 * then CLOCK_GETTIME. Returns a TT_METHOD_* (> 0) or -errno. Callers cache it. */
int tt_sysoff_probe(int fd);

/* Reads with a method from tt_sysoff_probe, n samples (1..TT_MAX_SAMPLES;
 * PRECISE takes one). Returns 0 or -errno. */
int tt_sysoff_read(int fd, int method, int n, struct tt_reading *out);
/* cdef-end */

#endif
