/*
 * tt_readings.h - the readings of decoded stamps texts as the records hold them (tt_readings.c).
 */
#ifndef TT_READINGS_H
#define TT_READINGS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* stamp_readings(slots, sketch, sends, send_offsets, rows, degraded, own, stamp_type, quality_names, out) -> bool:
 * out[i] = row i's (start, end, remote, recv lts, sends, sketch, None) for each i in rows (a stamps block's
 * arrays, tt_stamps_read.h's layout; degraded[i] the row's flag; own[k] the sketch of the k-th row where none
 * was recorded); False where declined (rows may be written already: the caller writes them all again). */
PyObject *tt_stamp_readings(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
