/*
 * tt_skeleton.c - decoded spans' OTLP fields as the analysis reads them, in C
 * (tempotrace_sdk._columns.span_fields; analysis/columnar/decode.py, spec/analysis.md §5.6).
 *
 * Why: msgspec decodes each line's skeleton into small Structs at the decode floor, but moving their fields
 * into columns cost as much again in Python: a loop over the spans, the ids and names made Arrow strings,
 * checked there by regular expressions, lowered and made Python strings again for the records (about 1.7 us
 * a span, 10% of the columnar engine on the HTTP demo's export). This reads each span Struct's slots once
 * (the offsets its type's member descriptors name) and answers what the later stages read: the ids in lower
 * case, one object per distinct trace id and name, the times as uint64 columns, and which spans the reference
 * must read instead (an id not hex of its size, a kind that is no number 0..2^31-1, a time outside fixed64)
 * or whose status is ERROR.
 *
 * It answers for what msgspec's decode of the skeleton holds and None for anything else (an item not exactly
 * the span type, a field not of the type the Struct declares), so decode.py's Python reading answers there.
 * Nothing it calls runs Python code but dict insertions of exact strs, whose hash and equality are str's own.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "tt_skeleton.h"
#include "tt_stampfields.h"

enum { F_TRACE, F_SPAN, F_PARENT, F_NAME, F_KIND, F_START, F_END, F_ATTRIBUTES, F_STATUS, SPAN_FIELDS };
static const char *const SPAN_FIELD_NAMES[SPAN_FIELDS] = {"traceId", "spanId", "parentSpanId", "name", "kind",
							  "startTimeUnixNano", "endTimeUnixNano", "attributes", "status"};
enum { S_CODE, STATUS_FIELDS };
static const char *const STATUS_FIELD_NAMES[STATUS_FIELDS] = {"code"};

#define KIND_MAX 2147483647LL /* OTLP's SpanKind is an int32 enum (values.span_kind) */
#define STATUS_ERROR 2	      /* STATUS_CODE_ERROR (otlp.STATUS_ERROR) */

static PyObject *slot(PyObject *o, Py_ssize_t offset)
{
	return *(PyObject **)((char *)o + offset);
}

/* An id as the rules read it: 1 when `s` (an exact str) is `digits` hex digits (or empty, where `empty_ok`),
 * with *upper set when any digit is upper case; 0 when it is not. */
static int hex_id(PyObject *s, Py_ssize_t digits, int empty_ok, int *upper)
{
	Py_ssize_t n = PyUnicode_GET_LENGTH(s);
	*upper = 0;
	if (n == 0)
		return empty_ok;
	if (n != digits || !PyUnicode_IS_ASCII(s))
		return 0;
	const Py_UCS1 *d = PyUnicode_1BYTE_DATA(s);
	for (Py_ssize_t i = 0; i < n; i++) {
		Py_UCS1 c = d[i];
		if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))
			continue;
		if (c >= 'A' && c <= 'F') {
			*upper = 1;
			continue;
		}
		return 0;
	}
	return 1;
}

/* The id in lower case (a new reference): `s` itself unless it has an upper-case digit. */
static PyObject *lowered(PyObject *s, int upper)
{
	if (!upper)
		return Py_NewRef(s);
	Py_ssize_t n = PyUnicode_GET_LENGTH(s);
	PyObject *out = PyUnicode_New(n, 127);
	if (out == NULL)
		return NULL;
	const Py_UCS1 *d = PyUnicode_1BYTE_DATA(s);
	Py_UCS1 *o = PyUnicode_1BYTE_DATA(out);
	for (Py_ssize_t i = 0; i < n; i++)
		o[i] = (d[i] >= 'A' && d[i] <= 'F') ? (Py_UCS1)(d[i] - 'A' + 'a') : d[i];
	return out;
}

/* The one object of `s`'s value in `seen` (a new reference): the first taken. */
static PyObject *shared(PyObject *seen, PyObject *s)
{
	PyObject *one = PyDict_SetDefault(seen, s, s); /* borrowed */
	return one == NULL ? NULL : Py_NewRef(one);
}

/* A time as fixed64: 1 with *out set when `v` (an exact int) is within 0..2^64-1, 0 when not, -1 an error. */
static int fixed64(PyObject *v, uint64_t *out)
{
	int overflow = 0;
	long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
	if (x == -1 && PyErr_Occurred())
		return -1;
	if (overflow < 0 || (!overflow && x < 0))
		return 0;
	if (!overflow) {
		*out = (uint64_t)x;
		return 1;
	}
	unsigned long long u = PyLong_AsUnsignedLongLong(v);
	if (u == (unsigned long long)-1 && PyErr_Occurred()) {
		if (!PyErr_ExceptionMatches(PyExc_OverflowError))
			return -1;
		PyErr_Clear();
		return 0;
	}
	*out = (uint64_t)u;
	return 1;
}

/* Whether a status code is ERROR, as `code in STATUS_ERROR` answers for an exact int or str; -1 an error. */
static int is_error(PyObject *code)
{
	if (PyLong_CheckExact(code)) {
		int overflow = 0;
		long long x = PyLong_AsLongLongAndOverflow(code, &overflow);
		if (x == -1 && PyErr_Occurred())
			return -1;
		return !overflow && x == STATUS_ERROR;
	}
	return PyUnicode_CompareWithASCIIString(code, "STATUS_CODE_ERROR") == 0;
}

enum { OUT_TRACE, OUT_SPAN, OUT_PARENT, OUT_NAME, OUT_KIND, OUT_START, OUT_END, OUT_ATTRIBUTES, OUT_LISTS };

PyObject *tt_span_fields(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
	if (nargs != 3 || !PyList_CheckExact(args[0]) || !PyType_Check(args[1]) || !PyType_Check(args[2])) {
		PyErr_SetString(PyExc_TypeError, "span_fields(spans: list, span_type: type, status_type: type)");
		return NULL;
	}
	PyObject *spans = args[0];
	PyTypeObject *span_type = (PyTypeObject *)args[1], *status_type = (PyTypeObject *)args[2];
	Py_ssize_t at[SPAN_FIELDS], status_at[STATUS_FIELDS];
	if (tt_slot_offsets(span_type, SPAN_FIELD_NAMES, SPAN_FIELDS, at) < 0 ||
	    tt_slot_offsets(status_type, STATUS_FIELD_NAMES, STATUS_FIELDS, status_at) < 0)
		Py_RETURN_NONE;
	Py_ssize_t n = PyList_GET_SIZE(spans);
	if (n > PY_SSIZE_T_MAX / 16)
		Py_RETURN_NONE;
	PyObject *lists[OUT_LISTS] = {NULL};
	PyObject *seen = NULL, *flags = NULL, *times = NULL, *result = NULL;
	for (int k = 0; k < OUT_LISTS; k++)
		if ((lists[k] = PyList_New(n)) == NULL)
			goto done;
	if ((seen = PyDict_New()) == NULL || (flags = PyBytes_FromStringAndSize(NULL, n)) == NULL ||
	    (times = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(2 * (size_t)n * sizeof(uint64_t)))) == NULL)
		goto done;
	uint8_t *flag = (uint8_t *)PyBytes_AS_STRING(flags);
	uint64_t *start = (uint64_t *)PyBytes_AS_STRING(times), *end = start + n;
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *sp = PyList_GET_ITEM(spans, i);
		if (Py_TYPE(sp) != span_type)
			goto plain_case_only;
		PyObject *v[SPAN_FIELDS];
		for (int f = 0; f < SPAN_FIELDS; f++)
			if ((v[f] = slot(sp, at[f])) == NULL)
				goto plain_case_only;
		if (!PyUnicode_CheckExact(v[F_TRACE]) || !PyUnicode_CheckExact(v[F_SPAN]) ||
		    !PyUnicode_CheckExact(v[F_PARENT]) || !PyUnicode_CheckExact(v[F_NAME]) ||
		    !(PyLong_CheckExact(v[F_KIND]) || PyUnicode_CheckExact(v[F_KIND])) ||
		    !PyLong_CheckExact(v[F_START]) || !PyLong_CheckExact(v[F_END]))
			goto plain_case_only;
		uint8_t f = 0;
		int upper, ok;
		PyObject *id;
		/* ids: in lower case where hex of their size; as written where not (the reference reads that span) */
		ok = hex_id(v[F_TRACE], 32, 0, &upper);
		f |= ok ? 0 : TT_SK_MARKED;
		if ((id = lowered(v[F_TRACE], ok && upper)) == NULL)
			goto done;
		PyObject *one = shared(seen, id);
		Py_DECREF(id);
		if (one == NULL)
			goto done;
		PyList_SET_ITEM(lists[OUT_TRACE], i, one);
		const int sizes[2] = {F_SPAN, F_PARENT};
		for (int k = 0; k < 2; k++) {
			ok = hex_id(v[sizes[k]], 16, sizes[k] == F_PARENT, &upper);
			f |= ok ? 0 : TT_SK_MARKED;
			if ((id = lowered(v[sizes[k]], ok && upper)) == NULL)
				goto done;
			PyList_SET_ITEM(lists[sizes[k] == F_SPAN ? OUT_SPAN : OUT_PARENT], i, id);
		}
		if ((one = shared(seen, v[F_NAME])) == NULL)
			goto done;
		PyList_SET_ITEM(lists[OUT_NAME], i, one);
		if (PyLong_CheckExact(v[F_KIND])) {
			int overflow = 0;
			long long kind = PyLong_AsLongLongAndOverflow(v[F_KIND], &overflow);
			if (kind == -1 && PyErr_Occurred())
				goto done;
			f |= (!overflow && kind >= 0 && kind <= KIND_MAX) ? 0 : TT_SK_MARKED;
		} else {
			f |= TT_SK_MARKED; /* a kind's name: the reference reads it */
		}
		PyList_SET_ITEM(lists[OUT_KIND], i, Py_NewRef(v[F_KIND]));
		int rc;
		start[i] = end[i] = 0; /* (0 where outside fixed64, as tt_skeleton.h says) */
		if ((rc = fixed64(v[F_START], &start[i])) < 0)
			goto done;
		f |= rc ? 0 : TT_SK_MARKED | TT_SK_NO_START;
		if ((rc = fixed64(v[F_END], &end[i])) < 0)
			goto done;
		f |= rc ? 0 : TT_SK_MARKED | TT_SK_NO_END;
		PyList_SET_ITEM(lists[OUT_START], i, Py_NewRef(v[F_START]));
		PyList_SET_ITEM(lists[OUT_END], i, Py_NewRef(v[F_END]));
		PyList_SET_ITEM(lists[OUT_ATTRIBUTES], i, Py_NewRef(v[F_ATTRIBUTES]));
		PyObject *status = v[F_STATUS];
		if (status != Py_None) {
			if (Py_TYPE(status) != status_type)
				goto plain_case_only;
			PyObject *code = slot(status, status_at[S_CODE]);
			if (code == NULL || !(PyLong_CheckExact(code) || PyUnicode_CheckExact(code)))
				goto plain_case_only;
			if ((rc = is_error(code)) < 0)
				goto done;
			f |= rc ? TT_SK_ERROR : 0;
		}
		flag[i] = f;
	}
	result = PyTuple_New(OUT_LISTS + 2);
	if (result == NULL)
		goto done;
	for (int k = 0; k < OUT_LISTS; k++) {
		PyTuple_SET_ITEM(result, k, lists[k]);
		lists[k] = NULL;
	}
	PyTuple_SET_ITEM(result, OUT_LISTS, flags);
	PyTuple_SET_ITEM(result, OUT_LISTS + 1, times);
	flags = times = NULL;
	goto done;
plain_case_only:
	result = Py_NewRef(Py_None);
done:
	/* (a list's unset items are NULL, which its dealloc skips) */
	for (int k = 0; k < OUT_LISTS; k++)
		Py_XDECREF(lists[k]);
	Py_XDECREF(seen);
	Py_XDECREF(flags);
	Py_XDECREF(times);
	return result;
}
