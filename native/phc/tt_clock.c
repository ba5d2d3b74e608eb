/* tt_clock.c - clock_gettime by id (see tt_clock.h). */
#include <errno.h>
#include <time.h>

#include "tt_clock.h"

/* From the kernel's posix-timers.h; linuxptp's missing.h carries the same. */
#define TT_CLOCKFD 3
#define TT_FD_TO_CLOCKID(fd) ((clockid_t)((((unsigned int)~(fd)) << 3) | TT_CLOCKFD))

int tt_fd_clockid(int fd)
{
	return (int)TT_FD_TO_CLOCKID(fd);
}

int tt_clock_read_ns(int clock_id, int64_t *out_ns)
{
	struct timespec ts;

	if (!out_ns)
		return -EFAULT;
	if (clock_gettime((clockid_t)clock_id, &ts))
		return -errno;
	*out_ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
	return 0;
}
