/*
 * tt_stampfields.h - the fields of many analysis Stamps as int64 columns (tt_stampfields.c).
 */
#ifndef TT_STAMPFIELDS_H
#define TT_STAMPFIELDS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* the flags column's bits (analysis/stamparrays.py reads them) */
#define TT_SF_HAVE 1	 /* a reading */
#define TT_SF_UNKNOWN 2	 /* quality UNKNOWN */
#define TT_SF_DEGRADED 4 /* the policy degraded it */
#define TT_SF_DOMAIN 8	 /* it names a host clock domain */

/* analysis.events.Stamp's fields, in the order tt_stamp_offsets looks them up */
enum { F_PTP, F_UNC, F_QUALITY, F_LTS, F_DEGRADED, F_DOMAIN, N_FIELDS };

/* The slot offset of each field of `type` (its member descriptors'); -1 when one is not a plain object slot. */
int tt_stamp_offsets(PyTypeObject *type, Py_ssize_t offsets[N_FIELDS]);

/* An int field as int64 (`none` for None when `none_ok`); 0 done, 1 not the plain case, -1 an error set. */
int tt_int_field(PyObject *v, int none_ok, int64_t none, int64_t *out);

/* stamp_fields(stamps, stamp_type) -> bytes | None: four int64 columns of len(stamps) each, one after the
 * other: reading (-1: none), bound, Lamport value (-1: none), flags; None for anything but the plain case. */
PyObject *tt_stamp_fields(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
