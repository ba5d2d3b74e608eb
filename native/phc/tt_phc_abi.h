/*
 * tt_phc_abi.h - what this build of the native PHC module is and knows.
 *
 * Everything between the cdef markers is also the cffi cdef
 * (native/build_phc.py extracts it), so it must stay plain C declarations:
 * no preprocessor lines inside the markers.
 */
#ifndef TT_PHC_ABI_H
#define TT_PHC_ABI_H

/* cdef-begin */
/* Bump together with ABI_VERSION in tempotrace_sdk/clocks/_native.py
 * whenever any declaration between cdef markers changes. */
enum { TT_PHC_ABI_VERSION = 5 };

/* Capability bits: which interfaces the kernel headers used at build time
 * declare (the running kernel may still refuse them; reads probe). */
enum {
	TT_CAP_SYS_OFFSET_PRECISE = 1,
	TT_CAP_SYS_OFFSET_EXTENDED = 2,
	TT_CAP_SYS_OFFSET = 4,
	TT_CAP_ETHTOOL_TS_INFO = 8,
	TT_CAP_CLOCK_TAI = 16
};

/* Returns TT_PHC_ABI_VERSION as compiled; Python refuses a mismatch. */
int tt_phc_abi_version(void);

/* Returns the TT_CAP_* bits known at build time. */
unsigned int tt_phc_caps_compiled(void);
/* cdef-end */

#endif
