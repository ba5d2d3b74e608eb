/* tt_sysoff.c - PHC vs system clock sandwiches (see tt_sysoff.h). */
#include <errno.h>
#include <linux/ptp_clock.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>

#include "tt_clock.h"
#include "tt_sysoff.h"

/* The kernel's sample cap must match ours (we size arrays by it), and the
 * ioctl structs must have the layout the conversions below index into. */
_Static_assert(PTP_MAX_SAMPLES == TT_MAX_SAMPLES, "PTP_MAX_SAMPLES changed");
_Static_assert(sizeof(struct ptp_clock_time) == 16, "struct ptp_clock_time layout");
_Static_assert(offsetof(struct ptp_clock_time, nsec) == 8, "ptp_clock_time.nsec offset");
_Static_assert(offsetof(struct ptp_sys_offset, ts) == 16, "ptp_sys_offset.ts offset");
_Static_assert(sizeof(((struct ptp_sys_offset *)0)->ts) == (2 * TT_MAX_SAMPLES + 1) * 16, "ptp_sys_offset.ts size");
#ifdef PTP_SYS_OFFSET_EXTENDED
_Static_assert(offsetof(struct ptp_sys_offset_extended, ts) == 16, "ptp_sys_offset_extended.ts offset");
_Static_assert(sizeof(((struct ptp_sys_offset_extended *)0)->ts) == TT_MAX_SAMPLES * 3 * 16,
	       "ptp_sys_offset_extended.ts size");
#endif
#ifdef PTP_SYS_OFFSET_PRECISE
_Static_assert(offsetof(struct ptp_sys_offset_precise, sys_realtime) == 16, "ptp_sys_offset_precise layout");
#endif

static int64_t pct_ns(const struct ptp_clock_time *t)
{
	return (int64_t)t->sec * 1000000000LL + t->nsec;
}

int tt_sysoff_select(const struct tt_sample *samples, int n, int method, struct tt_reading *out)
{
	int i, best = -1;
	int64_t best_width = 0;

	if (!samples || !out)
		return -EFAULT;
	if (n < 1 || n > TT_MAX_SAMPLES)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		int64_t width;

		/* Overflow means garbage timestamps; negative means the system
		 * clock stepped inside this sample. Neither can be trusted. */
		if (__builtin_sub_overflow(samples[i].sys_after_ns, samples[i].sys_before_ns, &width) || width < 0)
			continue;
		if (best < 0 || width < best_width) {
			best = i;
			best_width = width;
		}
	}
	if (best < 0)
		return -EAGAIN;
	memset(out, 0, sizeof(*out));
	out->phc_ns = samples[best].phc_ns;
	out->sys_ns = samples[best].sys_before_ns + best_width / 2;
	out->width_ns = best_width;
	out->method = method;
	out->samples = n;
	return 0;
}

static int read_precise(int fd, struct tt_reading *out)
{
#ifdef PTP_SYS_OFFSET_PRECISE
	struct ptp_sys_offset_precise pso;
	struct tt_sample s;

	memset(&pso, 0, sizeof(pso));
	if (ioctl(fd, PTP_SYS_OFFSET_PRECISE, &pso))
		return -errno;
	/* A cross-timestamp: both clocks latched at one instant, width 0. */
	s.sys_before_ns = s.sys_after_ns = pct_ns(&pso.sys_realtime);
	s.phc_ns = pct_ns(&pso.device);
	return tt_sysoff_select(&s, 1, TT_METHOD_PRECISE, out);
#else
	(void)fd;
	(void)out;
	return -EOPNOTSUPP;
#endif
}

static int read_extended(int fd, int n, struct tt_reading *out)
{
#ifdef PTP_SYS_OFFSET_EXTENDED
	struct ptp_sys_offset_extended pso;
	struct tt_sample s[TT_MAX_SAMPLES];
	int i;

	memset(&pso, 0, sizeof(pso));
	pso.n_samples = (unsigned int)n;
	if (ioctl(fd, PTP_SYS_OFFSET_EXTENDED, &pso))
		return -errno;
	for (i = 0; i < n; i++) {
		s[i].sys_before_ns = pct_ns(&pso.ts[i][0]);
		s[i].phc_ns = pct_ns(&pso.ts[i][1]);
		s[i].sys_after_ns = pct_ns(&pso.ts[i][2]);
	}
	return tt_sysoff_select(s, n, TT_METHOD_EXTENDED, out);
#else
	(void)fd;
	(void)n;
	(void)out;
	return -EOPNOTSUPP;
#endif
}

static int read_basic(int fd, int n, struct tt_reading *out)
{
	struct ptp_sys_offset pso;
	struct tt_sample s[TT_MAX_SAMPLES];
	int i;

	memset(&pso, 0, sizeof(pso));
	pso.n_samples = (unsigned int)n;
	if (ioctl(fd, PTP_SYS_OFFSET, &pso))
		return -errno;
	/* ts[] is sys, phc, sys, phc, ..., sys: sample i is ts[2i..2i+2]. */
	for (i = 0; i < n; i++) {
		s[i].sys_before_ns = pct_ns(&pso.ts[2 * i]);
		s[i].phc_ns = pct_ns(&pso.ts[2 * i + 1]);
		s[i].sys_after_ns = pct_ns(&pso.ts[2 * i + 2]);
	}
	return tt_sysoff_select(s, n, TT_METHOD_BASIC, out);
}

static int read_clock_gettime(int fd, int n, struct tt_reading *out)
{
	struct tt_sample s[TT_MAX_SAMPLES];
	int i, rc, phc_id = tt_fd_clockid(fd);

	memset(s, 0, sizeof(s));
	for (i = 0; i < n; i++) {
		rc = tt_clock_read_ns(CLOCK_REALTIME, &s[i].sys_before_ns);
		if (!rc)
			rc = tt_clock_read_ns(phc_id, &s[i].phc_ns);
		if (!rc)
			rc = tt_clock_read_ns(CLOCK_REALTIME, &s[i].sys_after_ns);
		if (rc)
			return rc;
	}
	return tt_sysoff_select(s, n, TT_METHOD_CLOCK_GETTIME, out);
}

int tt_sysoff_read(int fd, int method, int n, struct tt_reading *out)
{
	if (!out)
		return -EFAULT;
	if (n < 1 || n > TT_MAX_SAMPLES)
		return -EINVAL;
	switch (method) {
	case TT_METHOD_PRECISE:
		return read_precise(fd, out);
	case TT_METHOD_EXTENDED:
		return read_extended(fd, n, out);
	case TT_METHOD_BASIC:
		return read_basic(fd, n, out);
	case TT_METHOD_CLOCK_GETTIME:
		return read_clock_gettime(fd, n, out);
	default:
		return -EINVAL;
	}
}

int tt_sysoff_probe(int fd)
{
	struct tt_reading r;
	int rc;

	if (!read_precise(fd, &r))
		return TT_METHOD_PRECISE;
	if (!read_extended(fd, 1, &r))
		return TT_METHOD_EXTENDED;
	if (!read_basic(fd, 1, &r))
		return TT_METHOD_BASIC;
	rc = read_clock_gettime(fd, 1, &r);
	return rc ? rc : TT_METHOD_CLOCK_GETTIME;
}
