/*
 * tt_attrs.c - spans' OTLP JSON attribute arrays into columns, in C
 * (tempotrace_sdk._columns; spec/analysis.md §5.6).
 *
 * Why: msgspec decodes a line's skeleton at a fraction of json.loads, but a
 * Python loop that puts each attribute of each span in its column costs as
 * much again (issue 24: 0.29x json.loads on the torch demo's export, more
 * than everything the columnar analysis may spend after the decode). This
 * reads each span's `attributes` (the bytes msgspec left as msgspec.Raw:
 * JSON it has already checked) and writes the values of the keys it is given
 * straight into Arrow's buffers (a validity bitmap and int64 values, int32
 * offsets and UTF-8 data, a bitmap of booleans); no Python object per value
 * but an integer array's list. Keys it is not given are skipped.
 *
 * It takes only the exporter's plain shape: {"key":"k","value":{"<kind>":v}}
 * in that order, one kind per value, strings without escapes, integers that
 * fit int64 written as OTLP JSON writes them. A span holding anything else
 * among the given keys (an escape, another kind than the column's, a key
 * twice, a value of two kinds) is refused whole: its cells stay None and its
 * row number is returned, for the Python pivot (analysis/columnar/pivot.py),
 * which reads every shape msgspec reads. tests/analysis/test_columnar_pivot.py
 * holds the two to the same answers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "tt_claimphysics.h"
#include "tt_ownsketch.h"
#include "tt_readings.h"
#include "tt_replay.h"
#include "tt_skeleton.h"
#include "tt_stampfields.h"

/* A column's kind: what value its cells hold (analysis/schema.py's kinds the pivot knows). */
enum { K_INT = 0, K_STRING = 1, K_BOOL = 2, K_INT_ARRAY = 3 };

#define MAX_COLUMNS 256
#define MAX_DEPTH 64 /* nesting skip_value passes over; deeper is refused */
#define SLOTS 1024 /* open addressing over the keys' bytes, at most a quarter full */

typedef struct {
	char *key; /* (owned, UTF-8) NULL: an empty slot */
	Py_ssize_t len;
	int col;
} Slot;

typedef struct {
	PyObject_HEAD
	Slot slots[SLOTS];
	int kinds[MAX_COLUMNS];
	Py_ssize_t n_columns;
	int strings[MAX_COLUMNS]; /* the string columns, whose offsets each row writes */
	int n_strings;
} Pivot;

/* The keys' slot: their length and last eight bytes (they share a prefix: "tempotrace."), mixed. memcmp on the
 * whole key decides; this only spreads them. */
static unsigned hash_of(const char *s, Py_ssize_t n)
{
	uint64_t tail = 0;
	memcpy(&tail, n >= 8 ? s + n - 8 : s, (size_t)(n >= 8 ? 8 : n));
	uint64_t h = (tail ^ (uint64_t)n * 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
	return (unsigned)(h >> 32);
}

/* The column of a key (its bytes as written), -1 when it is not one of the pivot's. */
static int column_of(const Pivot *self, const char *s, Py_ssize_t n)
{
	for (unsigned i = hash_of(s, n) & (SLOTS - 1);; i = (i + 1) & (SLOTS - 1)) {
		const Slot *slot = &self->slots[i];
		if (slot->key == NULL)
			return -1;
		if (slot->len == n && memcmp(slot->key, s, (size_t)n) == 0)
			return slot->col;
	}
}

typedef struct {
	const char *p, *end;
} Cur;

static void ws(Cur *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
		c->p++;
}

static int lit(Cur *c, char ch)
{
	ws(c);
	if (c->p < c->end && *c->p == ch) {
		c->p++;
		return 1;
	}
	return 0;
}

/* A string without escapes (its bytes [*s, *s + *n)); 0 for one with an escape, or not a string here. */
static int plain_string(Cur *c, const char **s, Py_ssize_t *n)
{
	ws(c);
	if (c->p >= c->end || *c->p != '"')
		return 0;
	const char *q = memchr(c->p + 1, '"', (size_t)(c->end - c->p - 1));
	if (q == NULL || memchr(c->p + 1, '\\', (size_t)(q - c->p - 1)) != NULL)
		return 0;
	*s = c->p + 1;
	*n = q - *s;
	c->p = q + 1;
	return 1;
}

/* Whether the next string is exactly ``word`` (a field name of ``w`` bytes) and a colon follows. */
static int name_is_n(Cur *c, const char *word, size_t w)
{
	const char *s;
	Py_ssize_t n;
	return plain_string(c, &s, &n) && (size_t)n == w && memcmp(s, word, w) == 0 && lit(c, ':');
}

#define name_is(c, word) name_is_n((c), (word), sizeof(word) - 1)

/* Skips one JSON value (msgspec has checked the bytes: strings, brackets and escapes balance). */
static int skip_value(Cur *c)
{
	ws(c);
	int depth = 0;
	do {
		if (c->p >= c->end)
			return 0;
		char ch = *c->p;
		if (ch == '"') {
			c->p++;
			while (c->p < c->end && *c->p != '"') {
				if (*c->p == '\\' && c->end - c->p < 2)
					return 0;
				c->p += *c->p == '\\' ? 2 : 1;
			}
			if (c->p >= c->end)
				return 0;
			c->p++;
		} else if (ch == '{' || ch == '[') {
			if (++depth > MAX_DEPTH) /* (the Python pivot's decoder has a recursion limit: it decides) */
				return 0;
			c->p++;
		} else if (ch == '}' || ch == ']') {
			if (depth == 0)
				return 0;
			depth--;
			c->p++;
		} else if (depth == 0) { /* a number, true, false or null: up to what ends it */
			const char *start = c->p;
			while (c->p < c->end && !strchr(",}] \t\r\n", *c->p))
				c->p++;
			return c->p > start;
		} else {
			c->p++;
		}
	} while (depth > 0);
	return 1;
}

/* An int64 written as OTLP JSON writes one: digits (a leading minus), as a number or in a string; no leading
 * zero, no sign but minus, no fraction or exponent. */
static int int64_value(Cur *c, long long *out)
{
	ws(c);
	int quoted = c->p < c->end && *c->p == '"';
	if (quoted)
		c->p++;
	int neg = c->p < c->end && *c->p == '-';
	if (neg)
		c->p++;
	const char *d = c->p;
	unsigned long long v = 0;
	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		unsigned digit = (unsigned)(*c->p - '0');
		if (v > (ULLONG_MAX - digit) / 10)
			return 0;
		v = v * 10 + digit;
		c->p++;
	}
	Py_ssize_t n = c->p - d;
	if (n == 0 || (n > 1 && *d == '0') || (neg && v == 0))
		return 0;
	if (quoted) {
		if (c->p >= c->end || *c->p != '"')
			return 0;
		c->p++;
	} else if (c->p < c->end && (*c->p == '.' || *c->p == 'e' || *c->p == 'E')) {
		return 0;
	}
	if (neg ? v > (unsigned long long)LLONG_MAX + 1 : v > (unsigned long long)LLONG_MAX)
		return 0;
	*out = neg ? (long long)(0 - v) : (long long)v;
	return 1;
}

/* Whether bytes are UTF-8 (ASCII, the usual case, at once; else as Python decodes it). */
static int utf8(const char *s, Py_ssize_t n)
{
	for (Py_ssize_t i = 0; i < n; i++)
		if ((unsigned char)s[i] >= 0x80) {
			PyObject *check = PyUnicode_DecodeUTF8(s, n, NULL);
			if (check == NULL) {
				PyErr_Clear();
				return 0;
			}
			Py_DECREF(check);
			return 1;
		}
	return 1;
}

/* The value of a key not asked for, passed over: 1 when the reference decoder (otlp.py's AnyValue) would read it
 * too, which types the string, int and bool kinds and any array's elements, and ignores the other fields; 0
 * (refused: the Python pivot judges) for an array, or a kind not of the plain shape. */
static int other_value(Cur *c)
{
	if (!lit(c, '{'))
		return 0;
	if (lit(c, '}'))
		return 1;
	do {
		const char *f;
		Py_ssize_t fn;
		long long i;
		if (!plain_string(c, &f, &fn) || !lit(c, ':'))
			return 0;
		if (fn == 11 && memcmp(f, "stringValue", 11) == 0) {
			const char *s;
			Py_ssize_t n;
			if (!plain_string(c, &s, &n) || !utf8(s, n)) /* (the reference decoder refuses bytes not UTF-8) */
				return 0;
		} else if (fn == 8 && memcmp(f, "intValue", 8) == 0) {
			if (!int64_value(c, &i))
				return 0;
		} else if (fn == 9 && memcmp(f, "boolValue", 9) == 0) {
			ws(c);
			if (c->end - c->p >= 4 && memcmp(c->p, "true", 4) == 0)
				c->p += 4;
			else if (c->end - c->p >= 5 && memcmp(c->p, "false", 5) == 0)
				c->p += 5;
			else
				return 0;
		} else if (fn == 10 && memcmp(f, "arrayValue", 10) == 0) {
			return 0;
		} else if (!skip_value(c)) {
			return 0;
		}
	} while (lit(c, ','));
	return lit(c, '}');
}

/* One column's Arrow buffers under construction: validity (a bit per row), and int64 values / int32 offsets
 * and data / a bit per row of booleans, or (an integer array column) a list of one cell per row. */
typedef struct {
	PyObject *validity, *values, *data, *list;
	char *data_p;
	Py_ssize_t data_len, data_cap;
} Column;

static inline void bit_set(PyObject *bitmap, Py_ssize_t row, int on)
{
	unsigned char *b = (unsigned char *)PyByteArray_AS_STRING(bitmap) + row / 8;
	if (on)
		*b |= (unsigned char)(1u << (row % 8));
	else
		*b &= (unsigned char)~(1u << (row % 8));
}

static inline int bit_get(PyObject *bitmap, Py_ssize_t row)
{
	return (((unsigned char *)PyByteArray_AS_STRING(bitmap))[row / 8] >> (row % 8)) & 1;
}

static int data_append(Column *col, const char *s, Py_ssize_t n)
{
	if (n == 0)
		return 0;
	if (col->data_len + n > col->data_cap) {
		Py_ssize_t cap = col->data_cap * 2 + n + 1024;
		if (PyByteArray_Resize(col->data, cap) < 0)
			return -1;
		col->data_cap = cap;
		col->data_p = PyByteArray_AS_STRING(col->data);
	}
	memcpy(col->data_p + col->data_len, s, (size_t)n);
	col->data_len += n;
	return 0;
}

/* {"intValue":v} etc.: the value of a column of ``kind`` written into row ``row`` of ``col`` (its validity
 * bit set); 0 (nothing written, no error) when the value is not the plain shape of that kind. */
static int cell(Cur *c, int kind, Column *col, Py_ssize_t row)
{
	if (!lit(c, '{'))
		return 0;
	PyObject *v = NULL;
	int ok = 0;
	if (kind == K_INT) {
		long long i;
		if (name_is(c, "intValue") && int64_value(c, &i)) {
			((int64_t *)PyByteArray_AS_STRING(col->values))[row] = i;
			ok = 1;
		}
	} else if (kind == K_STRING) {
		const char *s;
		Py_ssize_t n;
		/* (bytes not UTF-8 are refused: the Python pivot says what they are) */
		if (name_is(c, "stringValue") && plain_string(c, &s, &n)) {
			if (utf8(s, n))
				ok = data_append(col, s, n) == 0;
		}
	} else if (kind == K_BOOL) {
		if (name_is(c, "boolValue")) {
			ws(c);
			if (c->end - c->p >= 4 && memcmp(c->p, "true", 4) == 0) {
				c->p += 4;
				bit_set(col->values, row, 1);
				ok = 1;
			} else if (c->end - c->p >= 5 && memcmp(c->p, "false", 5) == 0) {
				c->p += 5;
				bit_set(col->values, row, 0);
				ok = 1;
			}
		}
	} else if (kind == K_INT_ARRAY) {
		if (name_is(c, "arrayValue") && lit(c, '{') && name_is(c, "values") && lit(c, '[')) {
			PyObject *list = PyList_New(0);
			int ok = list != NULL;
			if (ok && !lit(c, ']')) {
				do {
					long long i;
					PyObject *x = NULL;
					ok = lit(c, '{') && name_is(c, "intValue") && int64_value(c, &i) && lit(c, '}') &&
					     (x = PyLong_FromLongLong(i)) != NULL && PyList_Append(list, x) == 0;
					Py_XDECREF(x);
				} while (ok && lit(c, ','));
				ok = ok && lit(c, ']');
			}
			if (ok && lit(c, '}'))
				v = list;
			else
				Py_XDECREF(list);
			PyErr_Clear();
		}
		if (v != NULL) {
			PyObject *was = PyList_GET_ITEM(col->list, row);
			PyList_SET_ITEM(col->list, row, v);
			Py_DECREF(was);
			ok = 1;
		}
	}
	if (ok && !lit(c, '}'))
		ok = 0;
	if (ok)
		bit_set(col->validity, row, 1);
	return ok;
}

/* A cell of row ``row`` made null again (a refused row); ``start``: the column's data length before it. */
static void cell_clear(Column *col, int kind, Py_ssize_t row, Py_ssize_t start)
{
	bit_set(col->validity, row, 0);
	if (kind == K_STRING)
		col->data_len = start;
	else if (kind == K_INT)
		((int64_t *)PyByteArray_AS_STRING(col->values))[row] = 0;
	else if (kind == K_BOOL)
		bit_set(col->values, row, 0);
	else if (kind == K_INT_ARRAY) {
		PyObject *was = PyList_GET_ITEM(col->list, row);
		PyList_SET_ITEM(col->list, row, Py_NewRef(Py_None));
		Py_DECREF(was);
	}
}

/* One span's attributes into row ``row`` of ``cols``: 1 taken, 0 refused (its cells made null again). */
static int scan_row(Pivot *self, const char *data, Py_ssize_t size, Column *cols, Py_ssize_t row)
{
	Cur c = {data, data + size};
	int set[MAX_COLUMNS];
	Py_ssize_t starts[MAX_COLUMNS];
	int n_set = 0, ok = 1;
	if (!lit(&c, '['))
		return 0;
	if (lit(&c, ']'))
		goto done;
	do {
		const char *k;
		Py_ssize_t kn;
		if (!lit(&c, '{') || !name_is(&c, "key") || !plain_string(&c, &k, &kn) || !lit(&c, ',') ||
		    !name_is(&c, "value")) {
			ok = 0;
			break;
		}
		int col = column_of(self, k, kn);
		if (col < 0) { /* not a key asked for: its value checked as the reference decoder checks it, then passed */
			if (!utf8(k, kn) || !other_value(&c) || !lit(&c, '}')) {
				ok = 0;
				break;
			}
			continue;
		}
		if (bit_get(cols[col].validity, row)) { /* a key twice: which wins is the Python pivot's rule */
			ok = 0;
			break;
		}
		starts[n_set] = cols[col].data_len;
		set[n_set] = col;
		if (!cell(&c, self->kinds[col], &cols[col], row) || !lit(&c, '}')) {
			cell_clear(&cols[col], self->kinds[col], row, starts[n_set]);
			ok = 0;
			break;
		}
		n_set++;
	} while (lit(&c, ','));
	ok = ok && lit(&c, ']');
done:
	ws(&c);
	if (ok && c.p == c.end)
		return 1;
	for (int i = n_set - 1; i >= 0; i--)
		cell_clear(&cols[set[i]], self->kinds[set[i]], row, starts[i]);
	return 0;
}

static PyObject *zeroed(Py_ssize_t n)
{
	PyObject *b = PyByteArray_FromStringAndSize(NULL, n);
	if (b != NULL && n > 0)
		memset(PyByteArray_AS_STRING(b), 0, (size_t)n);
	return b;
}

/* A column's buffers for n rows (the new references in col). */
static int column_new(Column *col, int kind, Py_ssize_t n)
{
	memset(col, 0, sizeof(*col));
	if ((col->validity = zeroed((n + 7) / 8)) == NULL)
		return -1;
	if (kind == K_INT)
		col->values = zeroed(n * 8);
	else if (kind == K_BOOL)
		col->values = zeroed((n + 7) / 8);
	else if (kind == K_STRING) {
		col->values = zeroed((n + 1) * 4); /* int32 offsets */
		col->data = zeroed(0);
	} else {
		col->list = PyList_New(n);
		if (col->list != NULL)
			for (Py_ssize_t i = 0; i < n; i++)
				PyList_SET_ITEM(col->list, i, Py_NewRef(Py_None));
	}
	return (col->values == NULL && col->list == NULL) || (kind == K_STRING && col->data == NULL) ? -1 : 0;
}

static void column_free(Column *col)
{
	Py_XDECREF(col->validity);
	Py_XDECREF(col->values);
	Py_XDECREF(col->data);
	Py_XDECREF(col->list);
}

/* The column as Python returns it: (validity, values) / (validity, offsets, data) / (validity, list). */
static PyObject *column_out(Column *col, int kind)
{
	if (kind == K_STRING) {
		if (PyByteArray_Resize(col->data, col->data_len) < 0)
			return NULL;
		return PyTuple_Pack(3, col->validity, col->values, col->data);
	}
	return PyTuple_Pack(2, col->validity, kind == K_INT_ARRAY ? col->list : col->values);
}

/* scan(attributes) -> (columns, refused): ``attributes`` a sequence of bytes-like objects (each a span's
 * attributes array, e.g. msgspec.Raw); ``columns`` one tuple of buffers per column (column_out), null where the
 * span has no plain value for it; ``refused`` the spans left to the Python pivot (null in every column). */
static PyObject *pivot_scan(Pivot *self, PyObject *arg)
{
	PyObject *seq = PySequence_Tuple(arg); /* (a copy: nothing run meanwhile can shrink it) */
	if (seq == NULL)
		return NULL;
	Py_ssize_t n = PyTuple_GET_SIZE(seq);
	if (n > INT32_MAX / 2 || n > PY_SSIZE_T_MAX / 8 - 1) {
		Py_DECREF(seq);
		PyErr_SetString(PyExc_ValueError, "Pivot.scan: too many spans for one call");
		return NULL;
	}
	Column *cols = PyMem_Calloc((size_t)(self->n_columns > 0 ? self->n_columns : 1), sizeof(Column));
	PyObject *refused = PyList_New(0), *out = NULL, *outs = NULL;
	Py_ssize_t made = 0;
	if (cols == NULL || refused == NULL)
		goto fail;
	for (; made < self->n_columns; made++)
		if (column_new(&cols[made], self->kinds[made], n) < 0) {
			made++;
			goto fail;
		}
	for (Py_ssize_t i = 0; i < n; i++) {
		Py_buffer view;
		if (PyObject_GetBuffer(PyTuple_GET_ITEM(seq, i), &view, PyBUF_SIMPLE) < 0)
			goto fail;
		int taken = scan_row(self, view.buf, view.len, cols, i);
		PyBuffer_Release(&view);
		if (PyErr_Occurred())
			goto fail; /* (no memory for a string column's data) */
		for (int j = 0; j < self->n_strings; j++) {
			Column *col = &cols[self->strings[j]];
			((int32_t *)PyByteArray_AS_STRING(col->values))[i + 1] = (int32_t)col->data_len;
		}
		if (!taken) {
			PyObject *num = PyLong_FromSsize_t(i);
			int rc = num != NULL ? PyList_Append(refused, num) : -1;
			Py_XDECREF(num);
			if (rc < 0)
				goto fail;
		}
	}
	for (Py_ssize_t k = 0; k < self->n_columns; k++)
		if (self->kinds[k] == K_STRING && cols[k].data_len > INT32_MAX) {
			PyErr_SetString(PyExc_ValueError, "Pivot.scan: more than 2 GiB of text in one column: fewer spans a call");
			goto fail;
		}
	if ((outs = PyList_New(self->n_columns)) == NULL)
		goto fail;
	for (Py_ssize_t k = 0; k < self->n_columns; k++) {
		PyObject *o = column_out(&cols[k], self->kinds[k]);
		if (o == NULL)
			goto fail;
		PyList_SET_ITEM(outs, k, o);
	}
	out = PyTuple_Pack(2, outs, refused);
fail:
	Py_DECREF(seq);
	if (cols != NULL) {
		for (Py_ssize_t k = 0; k < made; k++)
			column_free(&cols[k]);
		PyMem_Free(cols);
	}
	Py_XDECREF(outs);
	Py_XDECREF(refused);
	return out;
}

static void pivot_clear(Pivot *self)
{
	for (int i = 0; i < SLOTS; i++) {
		PyMem_Free(self->slots[i].key);
		self->slots[i].key = NULL;
	}
	self->n_columns = 0;
	self->n_strings = 0;
}

/* Pivot(columns): ``columns`` a sequence of (key, kind) pairs, kind 0 int, 1 string, 2 bool, 3 int array. */
static int pivot_init(Pivot *self, PyObject *args, PyObject *kwargs)
{
	PyObject *columns;
	if (!PyArg_ParseTuple(args, "O", &columns))
		return -1;
	PyObject *seq = PySequence_Fast(columns, "Pivot: a sequence of (key, kind)");
	if (seq == NULL)
		return -1;
	Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
	if (n > MAX_COLUMNS || n > SLOTS / 4) {
		Py_DECREF(seq);
		PyErr_Format(PyExc_ValueError, "Pivot: at most %d columns", MAX_COLUMNS);
		return -1;
	}
	pivot_clear(self);
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *key;
		int kind;
		const char *s;
		Py_ssize_t len;
		if (!PyArg_Parse(PySequence_Fast_GET_ITEM(seq, i), "(Ui)", &key, &kind) || kind < K_INT ||
		    kind > K_INT_ARRAY || (s = PyUnicode_AsUTF8AndSize(key, &len)) == NULL || column_of(self, s, len) >= 0) {
			pivot_clear(self);
			Py_DECREF(seq);
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_ValueError, "Pivot: each column a (key, kind 0..3), each key once");
			return -1;
		}
		unsigned at = hash_of(s, len) & (SLOTS - 1);
		while (self->slots[at].key != NULL)
			at = (at + 1) & (SLOTS - 1);
		if ((self->slots[at].key = PyMem_Malloc((size_t)len + 1)) == NULL) {
			pivot_clear(self);
			Py_DECREF(seq);
			PyErr_NoMemory();
			return -1;
		}
		memcpy(self->slots[at].key, s, (size_t)len + 1);
		self->slots[at].len = len;
		self->slots[at].col = (int)i;
		self->kinds[i] = kind;
		if (kind == K_STRING)
			self->strings[self->n_strings++] = (int)i;
	}
	Py_DECREF(seq);
	self->n_columns = n;
	return 0;
}

static void pivot_dealloc(Pivot *self)
{
	pivot_clear(self);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef pivot_methods[] = {
	{"scan", (PyCFunction)pivot_scan, METH_O,
	 "scan(attributes) -> (columns, refused): spans' attribute arrays into one list per column."},
	{NULL, NULL, 0, NULL}};

static PyTypeObject PivotType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tempotrace_sdk._columns.Pivot",
	.tp_basicsize = sizeof(Pivot),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Attribute arrays of spans into columns, for the keys it is given (native/columns/tt_attrs.c).",
	.tp_methods = pivot_methods,
	.tp_init = (initproc)pivot_init,
	.tp_new = PyType_GenericNew,
	.tp_dealloc = (destructor)pivot_dealloc,
};

static PyMethodDef module_methods[] = {
	{"replays", (PyCFunction)(void (*)(void))tt_replays, METH_FASTCALL,
	 "replays(pred, succ, orders, claim_in) -> bool: a happens-before structure replays to its end (tt_replay.h)."},
	{"stamp_readings", (PyCFunction)(void (*)(void))tt_stamp_readings, METH_FASTCALL,
	 "stamp_readings(slots, sketch, sends, send_offsets, rows, degraded, own, stamp_type, quality_names, out) -> "
	 "bool: decoded stamps texts' readings (tt_readings.h)."},
	{"span_fields", (PyCFunction)(void (*)(void))tt_span_fields, METH_FASTCALL,
	 "span_fields(spans, span_type, status_type) -> tuple | None: decoded spans' OTLP fields (tt_skeleton.h)."},
	{"stamp_fields", (PyCFunction)(void (*)(void))tt_stamp_fields, METH_FASTCALL,
	 "stamp_fields(stamps, stamp_type) -> bytes | None: Stamps' fields as int64 columns (tt_stampfields.h)."},
	{"in_sketches", (PyCFunction)(void (*)(void))tt_in_sketches, METH_FASTCALL,
	 "in_sketches(sketches, span_ids) -> bytes | None: each span id in its sketch (tt_ownsketch.h)."},
	{"own_masks", (PyCFunction)(void (*)(void))tt_own_masks, METH_FASTCALL,
	 "own_masks(span_ids, parents, rows) -> list[int] | None: each row's own sketch (tt_ownsketch.h)."},
	{"claim_physics", (PyCFunction)(void (*)(void))tt_claim_physics, METH_FASTCALL,
	 "claim_physics(starts, ends, start_stamps, end_stamps, extra, stamp_type) -> (code, value, witnesses) | "
	 "None: a claim's physics without host clock domains (tt_claimphysics.h)."},
	{NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tempotrace_sdk._columns",
				     "OTLP JSON attribute arrays into columns; spans' OTLP fields; Stamps' fields as columns; spans' "
				     "own sketches; claims' physics; happens-before replays; stamps' readings (spec/analysis.md §5.6).",
				     -1, module_methods};

PyMODINIT_FUNC PyInit__columns(void)
{
	if (PyType_Ready(&PivotType) < 0)
		return NULL;
	PyObject *m = PyModule_Create(&module);
	if (m == NULL)
		return NULL;
	if (PyModule_AddIntConstant(m, "UNCERTAINTY_SATURATED", TT_UNCERTAINTY_SATURATED) < 0 ||
	    PyModule_AddObjectRef(m, "Pivot", (PyObject *)&PivotType) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
