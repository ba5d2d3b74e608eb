/*
 * tt_clock.h - reading POSIX clocks by id, including a PHC's dynamic clock.
 */
#ifndef TT_CLOCK_H
#define TT_CLOCK_H

#include <stdint.h>

/* cdef-begin */
/* Reads clock_id (CLOCK_TAI, CLOCK_REALTIME, CLOCK_MONOTONIC_RAW, or a
 * dynamic id from tt_fd_clockid) into *out_ns.
 * Returns 0, or -errno (-EINVAL for an unknown id, -EFAULT for NULL). */
int tt_clock_read_ns(int clock_id, int64_t *out_ns);

/* The dynamic clock id of an open PHC fd (the kernel's FD_TO_CLOCKID). */
int tt_fd_clockid(int fd);
/* cdef-end */

#endif
