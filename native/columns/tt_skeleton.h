/*
 * tt_skeleton.h - decoded spans' OTLP fields as the analysis reads them (tt_skeleton.c).
 */
#ifndef TT_SKELETON_H
#define TT_SKELETON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* the flags' bits (analysis/columnar/decode.py reads them) */
#define TT_SK_MARKED 1	 /* the reference reads the span's OTLP fields (an id, its kind or a time) */
#define TT_SK_ERROR 2	 /* its status is ERROR */
#define TT_SK_NO_START 4 /* its start time is outside fixed64 */
#define TT_SK_NO_END 8	 /* its end time is outside fixed64 */

/* span_fields(spans, span_type, status_type) -> tuple | None: (trace ids, span ids, parent ids, names, kinds,
 * start times, end times, attributes: lists with one item a span; flags: one octet a span; times: the start
 * times then the end times as uint64, 0 where outside fixed64); None for anything but what msgspec's decode
 * of the skeleton holds. */
PyObject *tt_span_fields(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
