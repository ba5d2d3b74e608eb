/* tt_phc_open.c - open a PHC, read caps, map interface -> PHC (see tt_phc_open.h). */
#include <errno.h>
#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/ptp_clock.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tt_phc_open.h"

int tt_phc_get_caps(int fd, struct tt_phc_caps *out)
{
	struct ptp_clock_caps caps;

	if (!out)
		return -EFAULT;
	memset(&caps, 0, sizeof(caps));
	memset(out, 0, sizeof(*out));
	if (ioctl(fd, PTP_CLOCK_GETCAPS, &caps))
		return -errno;
	out->max_adj_ppb = caps.max_adj;
	out->n_alarm = caps.n_alarm;
	out->n_ext_ts = caps.n_ext_ts;
	out->n_per_out = caps.n_per_out;
	out->pps = caps.pps;
	out->n_pins = caps.n_pins;
	out->cross_timestamping = caps.cross_timestamping;
	out->adjust_phase = caps.adjust_phase;
	return 0;
}

int tt_phc_open(const char *path, int *fd_out, struct tt_phc_caps *caps_out)
{
	struct tt_phc_caps scratch;
	int fd, rc;

	if (!path || !fd_out)
		return -EFAULT;
	*fd_out = -1;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = tt_phc_get_caps(fd, caps_out ? caps_out : &scratch);
	if (rc) {
		close(fd);
		return rc;
	}
	*fd_out = fd;
	return 0;
}

int tt_phc_index_of_iface(const char *ifname, int *index_out)
{
#ifdef ETHTOOL_GET_TS_INFO
	struct ethtool_ts_info info;
	struct ifreq ifr;
	int fd, rc = 0;

	if (!ifname || !index_out)
		return -EFAULT;
	if (strlen(ifname) >= IFNAMSIZ)
		return -ENAMETOOLONG;
	memset(&info, 0, sizeof(info));
	memset(&ifr, 0, sizeof(ifr));
	info.cmd = ETHTOOL_GET_TS_INFO;
	strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
	ifr.ifr_data = (char *)&info;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, SIOCETHTOOL, &ifr))
		rc = -errno;
	else if (info.phc_index < 0)
		rc = -EOPNOTSUPP;
	else
		*index_out = info.phc_index;
	close(fd);
	return rc;
#else
	(void)ifname;
	(void)index_out;
	return -EOPNOTSUPP;
#endif
}

int tt_phc_close(int fd)
{
	return close(fd) ? -errno : 0;
}
