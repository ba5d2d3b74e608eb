/*
 * tt_stampfields.h - the fields of many analysis Stamps as int64 columns (tt_stampfields.c).
 */
#ifndef TT_STAMPFIELDS_H
#define TT_STAMPFIELDS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* the flags column's bits (analysis/stamparrays.py reads them) */
#define TT_SF_HAVE 1	 /* a reading */
#define TT_SF_UNKNOWN 2	 /* quality UNKNOWN */
#define TT_SF_DEGRADED 4 /* the policy degraded it */
#define TT_SF_DOMAIN 8	 /* it names a host clock domain */

/* stamp_fields(stamps, stamp_type) -> bytes | None: four int64 columns of len(stamps) each, one after the
 * other: reading (-1: none), bound, Lamport value (-1: none), flags; None for anything but the plain case. */
PyObject *tt_stamp_fields(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
