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
enum { TT_STAMP_PTP, TT_STAMP_UNC, TT_STAMP_QUALITY, TT_STAMP_LTS, TT_STAMP_DEGRADED, TT_STAMP_DOMAIN, TT_STAMP_FIELDS };

/* The slot offset of each of the `n` named fields of `type` (its member descriptors'); -1 when one is not a
 * plain object slot. */
int tt_slot_offsets(PyTypeObject *type, const char *const *names, int n, Py_ssize_t *offsets);

/* A C-contiguous view of `obj`'s buffer: items of `itemsize` octets (8: int64, format "q" or "l"; 1: octets, "B"
 * or "b") in `ndim` dimensions, rows of `width` items where `ndim` is 2. 0 done; -1 an error set (`exc` with
 * `message` where the buffer is of another type or shape), the view released. */
int tt_typed_view(PyObject *obj, Py_buffer *out, Py_ssize_t itemsize, int ndim, Py_ssize_t width, PyObject *exc,
		  const char *message);

/* tt_slot_offsets of a Stamp's fields, in the order of the enum above. */
int tt_stamp_offsets(PyTypeObject *type, Py_ssize_t offsets[TT_STAMP_FIELDS]);

/* An int field as int64 (`none` for None when `none_ok`); 0 done, 1 not the plain case (not exactly an int or a
 * bool, or beyond int64), -1 an error set. */
int tt_int_field(PyObject *v, int none_ok, int64_t none, int64_t *out);

/* A plain degraded flag (exactly True or False): 1 or 0; -1 anything else (no Python code is run for it). */
int tt_plain_flag(PyObject *v);

/* A plain quality (exactly a str): 1 when it is "UNKNOWN", 0 when another; -1 anything else. */
int tt_plain_unknown(PyObject *v);

/* stamp_fields(stamps, stamp_type) -> bytes | None: four int64 columns of len(stamps) each, one after the
 * other: reading (-1: none), bound, Lamport value (-1: none), flags; None for anything but the plain case. */
PyObject *tt_stamp_fields(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
