/*
 * tt_phc_open.h - finding and opening a PTP hardware clock, reading its caps.
 */
#ifndef TT_PHC_OPEN_H
#define TT_PHC_OPEN_H

#include <stdint.h>

/* cdef-begin */
/* PTP_CLOCK_GETCAPS, the fields we report (struct ptp_clock_caps). */
struct tt_phc_caps {
	int32_t max_adj_ppb;
	int32_t n_alarm;
	int32_t n_ext_ts;
	int32_t n_per_out;
	int32_t pps;
	int32_t n_pins;
	int32_t cross_timestamping;
	int32_t adjust_phase;
};

/* Opens path read-only and checks it answers PTP_CLOCK_GETCAPS, so that a
 * non-PTP file fails here (/dev/null: -ENOTTY) rather than at first read.
 * On success *fd_out is the open fd (close with tt_phc_close) and *caps_out
 * (if not NULL) is filled. Returns 0 or -errno; never leaks the fd. */
int tt_phc_open(const char *path, int *fd_out, struct tt_phc_caps *caps_out);

/* PTP_CLOCK_GETCAPS on an open fd. Returns 0 or -errno. */
int tt_phc_get_caps(int fd, struct tt_phc_caps *out);

/* The PHC index (N of /dev/ptpN) behind a network interface, via
 * SIOCETHTOOL/ETHTOOL_GET_TS_INFO. Returns 0, -ENODEV for no such
 * interface, -ENAMETOOLONG for a name >= IFNAMSIZ, -EOPNOTSUPP when the
 * interface has no PHC, or another -errno. */
int tt_phc_index_of_iface(const char *ifname, int *index_out);

/* Closes a fd from tt_phc_open. Returns 0 or -errno. */
int tt_phc_close(int fd);
/* cdef-end */

#endif
