/* tt_phc_abi.c - version and compile-time capabilities (see tt_phc_abi.h). */
#include <linux/ethtool.h>
#include <linux/ptp_clock.h>
#include <time.h>

#include "tt_phc_abi.h"

int tt_phc_abi_version(void)
{
	return TT_PHC_ABI_VERSION;
}

unsigned int tt_phc_caps_compiled(void)
{
	unsigned int caps = 0;
#ifdef PTP_SYS_OFFSET_PRECISE
	caps |= TT_CAP_SYS_OFFSET_PRECISE;
#endif
#ifdef PTP_SYS_OFFSET_EXTENDED
	caps |= TT_CAP_SYS_OFFSET_EXTENDED;
#endif
#ifdef PTP_SYS_OFFSET
	caps |= TT_CAP_SYS_OFFSET;
#endif
#ifdef ETHTOOL_GET_TS_INFO
	caps |= TT_CAP_ETHTOOL_TS_INFO;
#endif
#ifdef CLOCK_TAI
	caps |= TT_CAP_CLOCK_TAI;
#endif
	return caps;
}
