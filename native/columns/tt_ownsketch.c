/*
 * tt_ownsketch.c - the sketch a span without a recorded one holds, for many spans, in C
 * (tempotrace_sdk._columns.own_masks; analysis/columnar/sketchmask.py, spec/analysis.md §5.6 item 7), and
 * whether span ids are in sketches (in_sketches; analysis/edgebatch.py's SVC tests, about 1 us a test in Python).
 *
 * Why: such a span holds its own id and its parent's (values.py); the columnar decode computed both ids'
 * bits for every such span as numpy arithmetic and then made each sketch a Python int from its bytes,
 * about 1 us a span: 5% of --engine columnar on the HTTP demo's export. Here each id is read from its 16 hex
 * digits, its bits set by the C codec's own sketch code (native/ttext/ttext.c: MurmurHash3 x64 128, the
 * spec's k = 4 indexes), and the int made from the 32 octets once.
 *
 * An id that is not 16 hex digits (or not a str; a parent None too) makes the whole answer None:
 * order.own_mask then says what is wrong with it, as the reference does. Rows are ints within the lists
 * (IndexError, TypeError otherwise). The int is made by _PyLong_FromByteArray, CPython's (private but
 * present 3.10-3.13; 3.13's public PyLong_FromUnsignedNativeBytes would do when 3.10 is dropped).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "tt_ownsketch.h"
#include "ttext.h"

static int hex_digit(Py_UCS1 c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* An id's 8 octets from its 16 hex digits: 0 done, 1 not that (an empty str: 2). */
static int id_octets(PyObject *s, uint8_t out[TTEXT_SPAN_ID_LEN])
{
	if (!PyUnicode_Check(s))
		return 1;
	Py_ssize_t n = PyUnicode_GET_LENGTH(s);
	if (n == 0)
		return 2;
	if (n != 2 * TTEXT_SPAN_ID_LEN || !PyUnicode_IS_ASCII(s))
		return 1;
	const Py_UCS1 *d = PyUnicode_1BYTE_DATA(s);
	for (int i = 0; i < TTEXT_SPAN_ID_LEN; i++) {
		int hi = hex_digit(d[2 * i]), lo = hex_digit(d[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return 1;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

PyObject *tt_own_masks(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
	if (nargs != 3 || !PyList_CheckExact(args[0]) || !PyList_CheckExact(args[1]) || !PyList_CheckExact(args[2])) {
		PyErr_SetString(PyExc_TypeError, "own_masks(span_ids: list, parents: list, rows: list)");
		return NULL;
	}
	PyObject *ids = args[0], *parents = args[1], *rows = args[2];
	Py_ssize_t n = PyList_GET_SIZE(rows);
	PyObject *out = PyList_New(n);
	if (out == NULL)
		return NULL;
	for (Py_ssize_t k = 0; k < n; k++) {
		Py_ssize_t i = PyLong_AsSsize_t(PyList_GET_ITEM(rows, k));
		if (i == -1 && PyErr_Occurred())
			goto error;
		if (i < 0 || i >= PyList_GET_SIZE(ids) || i >= PyList_GET_SIZE(parents)) {
			PyErr_SetString(PyExc_IndexError, "own_masks: a row past the id lists");
			goto error;
		}
		uint8_t id[TTEXT_SPAN_ID_LEN], sketch[TTEXT_SKETCH_BYTES] = {0};
		if (id_octets(PyList_GET_ITEM(ids, i), id) != 0)
			goto declined;
		ttext_sketch_add(sketch, id);
		int parent = id_octets(PyList_GET_ITEM(parents, i), id);
		if (parent == 1)
			goto declined;
		if (parent == 0)
			ttext_sketch_add(sketch, id);
		PyObject *mask = _PyLong_FromByteArray(sketch, sizeof sketch, 0, 0); /* big-endian, unsigned */
		if (mask == NULL)
			goto error;
		PyList_SET_ITEM(out, k, mask);
	}
	return out;
declined:
	Py_DECREF(out);
	Py_RETURN_NONE;
error:
	Py_DECREF(out);
	return NULL;
}

/* An int's 32 octets, big-endian and unsigned: 0 done, -1 an exception set (OverflowError: negative, or past
 * 256 bits). CPython's private _PyLong_AsByteArray, which 3.13 gave an argument more. */
static int sketch_octets(PyObject *v, uint8_t out[TTEXT_SKETCH_BYTES])
{
#if PY_VERSION_HEX >= 0x030D0000
	return _PyLong_AsByteArray((PyLongObject *)v, out, TTEXT_SKETCH_BYTES, 0, 0, 1);
#else
	return _PyLong_AsByteArray((PyLongObject *)v, out, TTEXT_SKETCH_BYTES, 0, 0);
#endif
}

PyObject *tt_in_sketches(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
	if (nargs != 2 || !PyList_CheckExact(args[0]) || !PyList_CheckExact(args[1]) ||
	    PyList_GET_SIZE(args[0]) != PyList_GET_SIZE(args[1])) {
		PyErr_SetString(PyExc_TypeError, "in_sketches(sketches: list, span_ids: list), of one length");
		return NULL;
	}
	PyObject *sketches = args[0], *ids = args[1];
	Py_ssize_t n = PyList_GET_SIZE(sketches);
	PyObject *out = PyBytes_FromStringAndSize(NULL, n);
	if (out == NULL)
		return NULL;
	uint8_t *in = (uint8_t *)PyBytes_AS_STRING(out);
	for (Py_ssize_t k = 0; k < n; k++) {
		PyObject *held = PyList_GET_ITEM(sketches, k);
		in[k] = 0;
		if (held == Py_None)
			continue;
		uint8_t id[TTEXT_SPAN_ID_LEN], mask[TTEXT_SKETCH_BYTES] = {0}, bits[TTEXT_SKETCH_BYTES];
		if (!PyLong_CheckExact(held) || id_octets(PyList_GET_ITEM(ids, k), id) != 0)
			goto declined;
		/* the sketch's 32 octets as its int is made from them (big-endian, unsigned); a negative one, or one
		 * past 256 bits, is no sketch of ours: declined (Python's & answers it) */
		if (sketch_octets(held, bits) < 0) {
			if (!PyErr_ExceptionMatches(PyExc_OverflowError))
				goto error;
			PyErr_Clear();
			goto declined;
		}
		ttext_sketch_add(mask, id);
		int all = 1;
		for (int b = 0; b < TTEXT_SKETCH_BYTES; b++)
			all &= (bits[b] & mask[b]) == mask[b];
		in[k] = (uint8_t)all;
	}
	return out;
declined:
	Py_DECREF(out);
	Py_RETURN_NONE;
error:
	Py_DECREF(out);
	return NULL;
}
