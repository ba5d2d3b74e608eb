/*
 * tt_readings.c - the readings of decoded stamps texts as the records hold them, in C
 * (tempotrace_sdk._columns.stamp_readings; analysis/columnar/rows.py TextStamps.fill, spec/analysis.md §5.6).
 *
 * Why: the stamps column is decoded in C (native/stamp tt_stamps_read_column), but making each row's Stamps,
 * sends and sketch from its slots took numpy-to-list conversions and Python maps field by field: about
 * 1.4 us a span, 10% of the columnar engine on the HTTP demo's export. This makes them from the slots
 * directly: each row's (start, end, remote, recv lts, sends, sketch, None), values._from_slots' readings.
 *
 * It answers for the plain case and declines (False) anything else, which the Python fill answers: a
 * quality number outside the names it is given, a degraded flag that is not exactly True or False, a
 * sketch that is neither recorded nor given as an int. Arrays are read through the buffer protocol and
 * checked against the slots' layout (tt_stamps_read.h); a row outside them is an IndexError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "tt_readings.h"
#include "tt_stampfields.h"
#include "tt_stamps_read.h"

#define SKETCH_OCTETS 32
#define SEND_SLOTS 4 /* lts, ptp_ns, uncertainty_ns, clk_quality */

typedef struct {
	Py_buffer slots, sketch, sends, offsets;
	Py_ssize_t rows, n_sends;
} Arrays;

/* A view of one of the block's arrays (tt_typed_view). */
static int view(PyObject *obj, Py_buffer *out, Py_ssize_t itemsize, int ndim, Py_ssize_t width)
{
	return tt_typed_view(obj, out, itemsize, ndim, width, PyExc_ValueError,
			     "stamp_readings: arrays of the stamps block's layout");
}

static void release(Arrays *a)
{
	Py_buffer *views[4] = {&a->slots, &a->sketch, &a->sends, &a->offsets};
	for (int k = 0; k < 4; k++)
		if (views[k]->obj != NULL)
			PyBuffer_Release(views[k]);
}

/* Stamp(ptp_ns, uncertainty_ns, quality, lts[, degraded]) from four slots; NULL with an error set, or with
 * none set where the quality is not one of `names` (declined). */
static PyObject *stamp(PyObject *type, const int64_t *s, int quality_at, int lts_at, PyObject *names,
		       PyObject *degraded)
{
	int64_t q = s[quality_at];
	if (q < 0 || q >= PyTuple_GET_SIZE(names))
		return NULL;
	PyObject *args[5] = {PyLong_FromLongLong(s[0]), PyLong_FromLongLong(s[1]), PyTuple_GET_ITEM(names, q),
			     PyLong_FromLongLong(s[lts_at]), degraded};
	PyObject *out = NULL;
	if (args[0] != NULL && args[1] != NULL && args[3] != NULL)
		out = PyObject_Vectorcall(type, args, degraded != NULL ? 5 : 4, NULL);
	Py_XDECREF(args[0]);
	Py_XDECREF(args[1]);
	Py_XDECREF(args[3]);
	if (out == NULL && !PyErr_Occurred())
		PyErr_NoMemory();
	return out;
}

/* One row's readings tuple; NULL with an error set, or with none set where declined. */
static PyObject *readings(const Arrays *a, Py_ssize_t i, PyObject *type, PyObject *names, PyObject *degraded,
			  PyObject *own)
{
	const int64_t *v = (const int64_t *)a->slots.buf + i * TT_STAMPS_SLOTS;
	const int64_t *offsets = a->offsets.buf;
	PyObject *item[7] = {NULL};
	PyObject *out = NULL;
	if ((item[0] = stamp(type, v + TT_ST_START, 2, 3, names, degraded)) == NULL)
		goto done;
	if (v[TT_ST_HAS_END]) {
		if ((item[1] = stamp(type, v + TT_ST_END, 2, 3, names, degraded)) == NULL)
			goto done;
	} else {
		item[1] = Py_NewRef(Py_None);
	}
	int remote = v[TT_ST_HAS_REMOTE] != 0;
	/* the sender's record: ptp_ns, uncertainty_ns, clk_quality, ts_source, tenant_id, lts, merged, recv_lts */
	if (remote) {
		if ((item[2] = stamp(type, v + TT_ST_REMOTE, 2, 5, names, NULL)) == NULL)
			goto done;
	} else {
		item[2] = Py_NewRef(Py_None);
	}
	item[3] = remote && v[TT_ST_REMOTE + 6] ? PyLong_FromLongLong(v[TT_ST_REMOTE + 7]) : Py_NewRef(Py_None);
	if (item[3] == NULL)
		goto done;
	int64_t lo = offsets[i], hi = offsets[i + 1];
	if (lo < 0 || hi < lo || hi > a->n_sends)
		goto done; /* (declined: offsets the decoder never writes; the Python fill slices them as they are) */
	if ((item[4] = PyTuple_New((Py_ssize_t)(hi - lo))) == NULL)
		goto done;
	for (int64_t k = lo; k < hi; k++) {
		const int64_t *s = (const int64_t *)a->sends.buf + k * SEND_SLOTS;
		PyObject *send = Py_BuildValue("(LLL)", (long long)s[0], (long long)s[1], (long long)s[2]);
		if (send == NULL)
			goto done;
		PyTuple_SET_ITEM(item[4], (Py_ssize_t)(k - lo), send);
	}
	if (v[TT_ST_HAS_SKETCH]) {
		const uint8_t *octets = (const uint8_t *)a->sketch.buf + i * SKETCH_OCTETS;
		if ((item[5] = _PyLong_FromByteArray(octets, SKETCH_OCTETS, 0, 0)) == NULL) /* big-endian, unsigned */
			goto done;
	} else if (PyLong_CheckExact(own)) {
		item[5] = Py_NewRef(own);
	} else {
		goto done; /* (declined: no sketch for it) */
	}
	item[6] = Py_NewRef(Py_None);
	out = PyTuple_New(7);
	if (out == NULL)
		goto done;
	for (int k = 0; k < 7; k++) {
		PyTuple_SET_ITEM(out, k, item[k]);
		item[k] = NULL;
	}
done:
	for (int k = 0; k < 7; k++)
		Py_XDECREF(item[k]);
	return out;
}

PyObject *tt_stamp_readings(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
	if (nargs != 10 || !PyList_CheckExact(args[4]) || !PyList_CheckExact(args[5]) || !PyList_CheckExact(args[6]) ||
	    !PyType_Check(args[7]) || !PyTuple_CheckExact(args[8]) || !PyList_CheckExact(args[9])) {
		PyErr_SetString(PyExc_TypeError, "stamp_readings(slots, sketch, sends, send_offsets, rows: list, "
						 "degraded: list, own: list, stamp_type, quality_names: tuple, out: list)");
		return NULL;
	}
	PyObject *rows = args[4], *degraded = args[5], *own = args[6], *type = args[7], *names = args[8],
		 *out = args[9];
	Arrays a = {0};
	PyObject *result = NULL;
	if (view(args[0], &a.slots, 8, 2, TT_STAMPS_SLOTS) < 0 || view(args[1], &a.sketch, 1, 2, SKETCH_OCTETS) < 0 ||
	    view(args[2], &a.sends, 8, 2, SEND_SLOTS) < 0 || view(args[3], &a.offsets, 8, 1, 0) < 0)
		goto done;
	a.rows = a.slots.shape[0];
	a.n_sends = a.sends.shape[0];
	if (a.sketch.shape[0] != a.rows || a.offsets.shape[0] != a.rows + 1 || PyList_GET_SIZE(own) != PyList_GET_SIZE(rows)) {
		PyErr_SetString(PyExc_ValueError, "stamp_readings: a row's arrays of one length");
		goto done;
	}
	Py_ssize_t n = PyList_GET_SIZE(rows);
	for (Py_ssize_t k = 0; k < n; k++) {
		if (k >= PyList_GET_SIZE(rows) || k >= PyList_GET_SIZE(own)) { /* (changed under a Stamp's code) */
			PyErr_SetString(PyExc_IndexError, "stamp_readings: the rows changed while read");
			goto done;
		}
		Py_ssize_t i = PyLong_AsSsize_t(PyList_GET_ITEM(rows, k));
		if (i == -1 && PyErr_Occurred())
			goto done;
		if (i < 0 || i >= a.rows || i >= PyList_GET_SIZE(degraded) || i >= PyList_GET_SIZE(out)) {
			PyErr_SetString(PyExc_IndexError, "stamp_readings: a row past the arrays");
			goto done;
		}
		PyObject *flag = PyList_GET_ITEM(degraded, i);
		if (flag != Py_True && flag != Py_False)
			goto declined;
		PyObject *mine = Py_NewRef(PyList_GET_ITEM(own, k)); /* (Stamp() may run code: held) */
		PyObject *row = readings(&a, i, type, names, flag, mine);
		Py_DECREF(mine);
		if (row == NULL) {
			if (PyErr_Occurred())
				goto done;
			goto declined;
		}
		if (i >= PyList_GET_SIZE(out)) { /* (the list changed under a Stamp's code) */
			Py_DECREF(row);
			PyErr_SetString(PyExc_IndexError, "stamp_readings: a row past the arrays");
			goto done;
		}
		PyList_SetItem(out, i, row); /* steals row */
	}
	result = Py_NewRef(Py_True);
	goto done;
declined:
	result = Py_NewRef(Py_False);
done:
	release(&a);
	return result;
}
