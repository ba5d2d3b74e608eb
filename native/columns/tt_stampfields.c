/*
 * tt_stampfields.c - the fields of many analysis Stamps as int64 columns, in C
 * (tempotrace_sdk._columns.stamp_fields; analysis/stamparrays.py, spec/analysis.md §5.6).
 *
 * Why: the edge batches and large collectives decide pairs as numpy arrays,
 * but gathering each Stamp's fields into those arrays took one Python
 * comprehension a field: about 0.5 us a stamp, 6% of the columnar engine's
 * time on the HTTP demo's export, as much as deciding them. This reads the
 * fields straight from each Stamp's slots (the offsets its type's member
 * descriptors name), one pass.
 *
 * It answers for the plain case only and None for anything else, so the
 * Python comprehensions (which it equals on the plain case) answer there: an
 * item that is not exactly the given type, a field left unset, a reading,
 * bound or Lamport value that is not exactly an int (or None; a bool too) or
 * does not fit int64, a degraded flag that is not exactly True or False, a
 * quality that is not exactly a str. Nothing it calls runs Python code, so
 * the borrowed items it reads stay alive. (Whether any stamp names a domain
 * is answered by the comprehension over the domains, which compares them.)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#include "tt_stampfields.h"

static const char *const FIELD_NAMES[TT_STAMP_FIELDS] = {"ptp_ns", "uncertainty_ns", "quality", "lts", "degraded", "domain"};

int tt_slot_offsets(PyTypeObject *type, const char *const *names, int n, Py_ssize_t *offsets)
{
	if (type->tp_dict == NULL) /* (a static built-in type from 3.12 on: no Struct of ours) */
		return -1;
	for (int f = 0; f < n; f++) {
		PyObject *descr = PyDict_GetItemString(type->tp_dict, names[f]); /* borrowed */
		if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type))
			return -1;
		PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
		if (member->type != T_OBJECT_EX && member->type != T_OBJECT)
			return -1;
		offsets[f] = member->offset;
	}
	return 0;
}

int tt_typed_view(PyObject *obj, Py_buffer *out, Py_ssize_t itemsize, int ndim, Py_ssize_t width, PyObject *exc,
		  const char *message)
{
	if (PyObject_GetBuffer(obj, out, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND) < 0)
		return -1;
	const char *f = out->format != NULL ? out->format : "B";
	int typed = itemsize == 8 ? (!strcmp(f, "q") || !strcmp(f, "l")) : (!strcmp(f, "B") || !strcmp(f, "b"));
	if (!typed || out->itemsize != itemsize || out->ndim != ndim || (ndim == 2 && out->shape[1] != width)) {
		PyBuffer_Release(out);
		out->obj = NULL;
		PyErr_SetString(exc, message);
		return -1;
	}
	return 0;
}

int tt_stamp_offsets(PyTypeObject *type, Py_ssize_t offsets[TT_STAMP_FIELDS])
{
	return tt_slot_offsets(type, FIELD_NAMES, TT_STAMP_FIELDS, offsets);
}

int tt_int_field(PyObject *v, int none_ok, int64_t none, int64_t *out)
{
	if (v == Py_None && none_ok) {
		*out = none;
		return 0;
	}
	if (!PyLong_CheckExact(v) && !PyBool_Check(v)) /* (a subclass may read otherwise through __index__) */
		return 1;
	int overflow = 0;
	long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
	if (overflow)
		return 1;
	if (x == -1 && PyErr_Occurred())
		return -1;
	*out = (int64_t)x;
	return 0;
}

int tt_plain_flag(PyObject *v)
{
	return v == Py_True ? 1 : v == Py_False ? 0 : -1;
}

int tt_plain_unknown(PyObject *v)
{
	if (!PyUnicode_CheckExact(v))
		return -1;
	return PyUnicode_CompareWithASCIIString(v, "UNKNOWN") == 0;
}

PyObject *tt_stamp_fields(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
	if (nargs != 2 || !PyList_CheckExact(args[0]) || !PyType_Check(args[1])) {
		PyErr_SetString(PyExc_TypeError, "stamp_fields(stamps: list, stamp_type: type)");
		return NULL;
	}
	PyObject *stamps = args[0];
	PyTypeObject *type = (PyTypeObject *)args[1];
	Py_ssize_t offsets[TT_STAMP_FIELDS];
	if (tt_stamp_offsets(type, offsets) < 0)
		Py_RETURN_NONE;
	Py_ssize_t n = PyList_GET_SIZE(stamps);
	if (n > PY_SSIZE_T_MAX / 32)
		Py_RETURN_NONE;
	PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(4 * (size_t)n * sizeof(int64_t)));
	if (out == NULL)
		return NULL;
	int64_t *ptp = (int64_t *)PyBytes_AS_STRING(out), *unc = ptp + n, *lts = unc + n, *flags = lts + n;
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *s = PyList_GET_ITEM(stamps, i);
		if (Py_TYPE(s) != type)
			goto plain_case_only;
		PyObject *v[TT_STAMP_FIELDS];
		for (int f = 0; f < TT_STAMP_FIELDS; f++) {
			v[f] = *(PyObject **)((char *)s + offsets[f]);
			if (v[f] == NULL) /* unset: Python's read would raise */
				goto plain_case_only;
		}
		int rc;
		if ((rc = tt_int_field(v[TT_STAMP_PTP], 1, -1, &ptp[i])) || (rc = tt_int_field(v[TT_STAMP_UNC], 0, 0, &unc[i])) ||
		    (rc = tt_int_field(v[TT_STAMP_LTS], 1, -1, &lts[i]))) {
			if (rc < 0)
				goto error;
			goto plain_case_only;
		}
		/* only exact bools and strs: nothing here may run Python code (it could change the list) */
		int degraded = tt_plain_flag(v[TT_STAMP_DEGRADED]), unknown = tt_plain_unknown(v[TT_STAMP_QUALITY]);
		if (degraded < 0 || unknown < 0)
			goto plain_case_only;
		flags[i] = (v[TT_STAMP_PTP] != Py_None ? TT_SF_HAVE : 0) | (degraded ? TT_SF_DEGRADED : 0) |
			   (unknown ? TT_SF_UNKNOWN : 0) | (v[TT_STAMP_DOMAIN] != Py_None ? TT_SF_DOMAIN : 0);
	}
	return out;
plain_case_only:
	Py_DECREF(out);
	Py_RETURN_NONE;
error:
	Py_DECREF(out);
	return NULL;
}
