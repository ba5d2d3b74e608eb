/*
 * tt_claimphysics.c - a collective claim's physics when no stamp names a host clock domain, in C
 * (tempotrace_sdk._columns.claim_physics; analysis/claims_absolute.py, spec/analysis.md §1.3, §2.1).
 *
 * Why: every finished collective is decided so, most of them small, each a few Python loops over its
 * members' stamps: a tenth of --engine columnar's collective stage on the torch demo's export. This is
 * claims_absolute.absolute_physics's one pass, line for line: each side's usable stamps (order.stamp_usable
 * for a stamp without a domain), their top two by (value, member, reading, bound) as Python compares those
 * tuples, the witnesses in the order Python's dict first took their keys, each with its last excess.
 *
 * The sums are exact (128-bit). It declines (None) what it does not take, for the Python pass to answer:
 * more than MAX_MEMBERS stamps a side, an item that is not exactly the stamp type, a reading or bound that
 * is not exactly an int within int64, a degraded flag not exactly a bool, a quality not exactly a str (so no
 * Python code runs while it reads the lists), an extra that is not an int in 0..2^63-1, a member index that is not a small
 * int.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "tt_claimphysics.h"
#include "tt_stampfields.h"

#define MAX_MEMBERS 64

typedef __int128 wide;

typedef struct {
	long member;
	int64_t p, u;
} Usable;

typedef struct {
	wide key;
	long member;
	int64_t p, u;
	int set;
} Entry;

typedef struct {
	long i, j;
	wide excess;
} Witness;

/* Python's (key, member, p, u) > (key, member, p, u) */
static int greater(const Entry *a, const Entry *b)
{
	if (a->key != b->key)
		return a->key > b->key;
	if (a->member != b->member)
		return a->member > b->member;
	if (a->p != b->p)
		return a->p > b->p;
	return a->u > b->u;
}

static void top2_add(Entry top[2], Entry e)
{
	e.set = 1;
	if (!top[0].set || greater(&e, &top[0])) {
		top[1] = top[0];
		top[0] = e;
	} else if (!top[1].set || greater(&e, &top[1])) {
		top[1] = e;
	}
}

/* The best of top that is not `member`; NULL when none. */
static const Entry *other(const Entry top[2], long member)
{
	if (top[0].set && top[0].member != member)
		return &top[0];
	return top[1].set ? &top[1] : NULL;
}

/* order.interval_gap */
static wide interval_gap(wide pa, wide ua, wide pb, wide ub, wide extra)
{
	wide gap = (pb - ub) - (pa + ua) - extra;
	if (gap > 0)
		return gap;
	gap = (pa - ua) - (pb + ub) - extra;
	return gap > 0 ? -gap : 0;
}

/* The usable stamps of one side: 0 done (*n of them), 1 not the plain case, -1 an error set. */
static int usable_side(PyObject *members, PyObject *stamps, PyTypeObject *type, const Py_ssize_t off[TT_STAMP_FIELDS],
		       Usable *out, Py_ssize_t *n)
{
	Py_ssize_t len = PyList_GET_SIZE(stamps);
	*n = 0;
	for (Py_ssize_t k = 0; k < len; k++) {
		PyObject *s = PyList_GET_ITEM(stamps, k);
		if (Py_TYPE(s) != type)
			return 1;
		PyObject *ptp = *(PyObject **)((char *)s + off[TT_STAMP_PTP]), *unc = *(PyObject **)((char *)s + off[TT_STAMP_UNC]),
			 *quality = *(PyObject **)((char *)s + off[TT_STAMP_QUALITY]),
			 *degraded = *(PyObject **)((char *)s + off[TT_STAMP_DEGRADED]);
		if (ptp == NULL || unc == NULL || quality == NULL || degraded == NULL)
			return 1;
		int64_t p, u;
		int rc;
		if ((rc = tt_int_field(ptp, 1, INT64_MIN, &p)) || (rc = tt_int_field(unc, 0, 0, &u)))
			return rc;
		if (ptp == Py_None)
			continue;
		/* only exact bools and strs: nothing here may run Python code (it could change the lists) */
		int deg = tt_plain_flag(degraded), unknown = tt_plain_unknown(quality);
		if (deg < 0 || unknown < 0)
			return 1;
		if (deg || u >= TT_UNCERTAINTY_SATURATED || unknown)
			continue;
		PyObject *index = PyList_GET_ITEM(members, k);
		if (!PyLong_CheckExact(index))
			return 1;
		int overflow = 0;
		long m = PyLong_AsLongAndOverflow(index, &overflow);
		if (overflow)
			return 1;
		if (m == -1 && PyErr_Occurred())
			return -1;
		out[*n] = (Usable){m, p, u};
		(*n)++;
	}
	return 0;
}

/* An excess or a room (0 <= v < 2^65) as a Python int: 16 octets, little-endian (as tt_ownsketch.c makes its
 * ints, through CPython's _PyLong_FromByteArray). */
static PyObject *wide_to_long(wide v)
{
	if (v <= (wide)INT64_MAX)
		return PyLong_FromLongLong((long long)v);
	unsigned char le[16];
	for (int i = 0; i < 16; i++)
		le[i] = (unsigned char)((unsigned __int128)v >> (8 * i));
	return _PyLong_FromByteArray(le, sizeof le, 1, 0);
}

PyObject *tt_claim_physics(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
	if (nargs != 6 || !PyList_CheckExact(args[0]) || !PyList_CheckExact(args[1]) || !PyList_CheckExact(args[2]) ||
	    !PyList_CheckExact(args[3]) || !PyType_Check(args[5])) {
		PyErr_SetString(PyExc_TypeError,
				"claim_physics(starts: list, ends: list, start_stamps: list, end_stamps: list, "
				"extra: int, stamp_type: type)");
		return NULL;
	}
	PyObject *starts = args[0], *ends = args[1], *sstamps = args[2], *estamps = args[3];
	PyTypeObject *type = (PyTypeObject *)args[5];
	Py_ssize_t ns_all = PyList_GET_SIZE(sstamps), ne_all = PyList_GET_SIZE(estamps);
	if (ns_all > MAX_MEMBERS || ne_all > MAX_MEMBERS || PyList_GET_SIZE(starts) != ns_all ||
	    PyList_GET_SIZE(ends) != ne_all)
		Py_RETURN_NONE;
	if (!PyLong_Check(args[4]))
		Py_RETURN_NONE;
	int overflow = 0;
	long long extra_ll = PyLong_AsLongLongAndOverflow(args[4], &overflow);
	if (extra_ll == -1 && PyErr_Occurred())
		return NULL;
	if (overflow || extra_ll < 0)
		Py_RETURN_NONE;
	wide extra = extra_ll;
	Py_ssize_t off[TT_STAMP_FIELDS];
	if (tt_stamp_offsets(type, off) < 0)
		Py_RETURN_NONE;
	Usable us[MAX_MEMBERS], ue[MAX_MEMBERS];
	Py_ssize_t ns, ne;
	int rc;
	if ((rc = usable_side(starts, sstamps, type, off, us, &ns)) || (rc = usable_side(ends, estamps, type, off, ue, &ne))) {
		if (rc < 0)
			return NULL;
		Py_RETURN_NONE;
	}
	Entry latest[2] = {{0}}, earliest[2] = {{0}};
	for (Py_ssize_t k = 0; k < ns; k++)
		top2_add(latest, (Entry){(wide)us[k].p - us[k].u, us[k].member, us[k].p, us[k].u, 0});
	for (Py_ssize_t k = 0; k < ne; k++)
		top2_add(earliest, (Entry){-((wide)ue[k].p + ue[k].u), ue[k].member, ue[k].p, ue[k].u, 0});
	Witness found[2 * MAX_MEMBERS];
	Py_ssize_t nfound = 0;
	for (int side = 0; side < 2; side++) {
		Py_ssize_t n = side == 0 ? ne : ns;
		for (Py_ssize_t k = 0; k < n; k++) {
			const Usable *x = side == 0 ? &ue[k] : &us[k];
			const Entry *best = other(side == 0 ? latest : earliest, x->member);
			if (best == NULL)
				continue;
			wide gap = side == 0 ? interval_gap(best->p, best->u, x->p, x->u, extra)
					     : interval_gap(x->p, x->u, best->p, best->u, extra);
			if (gap >= 0)
				continue;
			long i = side == 0 ? best->member : x->member, j = side == 0 ? x->member : best->member;
			Py_ssize_t at = 0;
			while (at < nfound && (found[at].i != i || found[at].j != j))
				at++;
			found[at] = (Witness){i, j, -gap}; /* a key seen before keeps its place, takes the new excess */
			if (at == nfound)
				nfound++;
		}
	}
	if (nfound) {
		wide worst = 0;
		PyObject *witnesses = PyList_New(nfound);
		if (witnesses == NULL)
			return NULL;
		for (Py_ssize_t k = 0; k < nfound; k++) {
			if (found[k].excess > worst)
				worst = found[k].excess;
			PyObject *excess = wide_to_long(found[k].excess);
			PyObject *w = excess == NULL ? NULL : Py_BuildValue("(llN)", found[k].i, found[k].j, excess);
			if (w == NULL) {
				Py_DECREF(witnesses);
				return NULL;
			}
			PyList_SET_ITEM(witnesses, k, w);
		}
		PyObject *value = wide_to_long(worst);
		if (value == NULL) {
			Py_DECREF(witnesses);
			return NULL;
		}
		return Py_BuildValue("(iNN)", TT_CLAIM_AFTER, value, witnesses);
	}
	if (ns < ns_all || ne < ne_all) /* a member physics cannot use: silent on its pairs */
		return Py_BuildValue("(iiO)", TT_CLAIM_SILENT, 0, Py_None);
	Entry reach[2] = {{0}};
	for (Py_ssize_t k = 0; k < ns; k++)
		top2_add(reach, (Entry){(wide)us[k].p + us[k].u, us[k].member, us[k].p, us[k].u, 0});
	wide room = -1;
	for (Py_ssize_t k = 0; k < ne; k++) {
		const Entry *best = other(reach, ue[k].member);
		if (best == NULL) /* (decide_claim gives every end a partner: Python asserts it) */
			Py_RETURN_NONE;
		wide gap = interval_gap(best->p, best->u, ue[k].p, ue[k].u, extra);
		if (gap <= 0)
			return Py_BuildValue("(iiO)", TT_CLAIM_SILENT, 0, Py_None);
		if (room < 0 || gap < room)
			room = gap;
	}
	if (room < 0) /* (no end: Python asserts there is one) */
		Py_RETURN_NONE;
	PyObject *value = wide_to_long(room);
	return value == NULL ? NULL : Py_BuildValue("(iNO)", TT_CLAIM_BEFORE, value, Py_None);
}
