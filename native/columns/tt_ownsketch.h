/*
 * tt_ownsketch.h - the sketch a span without a recorded one holds, for many spans (tt_ownsketch.c).
 */
#ifndef TT_OWNSKETCH_H
#define TT_OWNSKETCH_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* own_masks(span_ids, parents, rows) -> list[int] | None: for each row, the 256-bit sketch of its span id and
 * (when not empty) its parent's id as an int; None when an id is not 16 hex digits. */
PyObject *tt_own_masks(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* in_sketches(sketches, span_ids) -> bytes | None: for each k, 1 when every bit span_ids[k] sets is in
 * sketches[k] (an int; None holds none: 0); None when an id is not 16 hex digits or a sketch not an int within
 * 0..2^256-1. */
PyObject *tt_in_sketches(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
