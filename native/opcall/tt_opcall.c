/*
 * tt_opcall.c - the traced call of a blocking host collective, in C
 * (tempotrace_sdk._opcall; spec/torch.md §1.4).
 *
 * Why: an op record costs two readings and one pack, yet the Python around
 * them (the wrapper, the argument reading, Recorder.begin/end) cost a rank
 * 6-7 µs an op in a loop of its own and several times that beside a real op
 * (issue 23, benchmarks/bench_torch_ops.py). Here the common case runs
 * without a Python frame of ours: a blocking collective on a host group, its
 * data plain CPU tensors, nothing carried, no SDK span wanted. It reads the
 * arguments, takes the group's seq, writes the record's start and end into
 * the recorder's ring through the native stamp's own tt_oprec_start/_end
 * (function pointers handed over by tempotrace_sdk/torch/wrappers.py, so the
 * reading is the one the cffi module makes) and calls torch.
 *
 * It holds the GIL throughout, so each change of a slot's state is atomic to
 * Python, and it takes the recorder's _slot_lock where Recorder.begin and
 * end do: the two paths share one ring and one set of rules. Every case it
 * does not know goes to the Python wrapper (`slow`) before anything is
 * taken; a reading it cannot make goes to the recorder's own Python words
 * (Recorder._start_words / _end_words); a record it cannot make at all goes
 * to the rest of the Python body (`tail`) with the seq already taken.
 * Nothing here raises into the program but torch's own exceptions.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "structmember.h"
#include "tt_opspans.h"
#include "tt_ring.h"

typedef int (*oprec_start_fn)(const void *clock, int64_t *lamport, char *rec, int64_t number, int64_t facts,
			      int64_t seq, int64_t nbytes, int64_t root);
typedef int (*oprec_end_fn)(const void *clock, int64_t *lamport, char *rec, int64_t completion);


/* What configure() was given, and the native target last resolved. */
static struct {
	PyObject *settings;    /* wrappers.settings */
	PyObject *inside;      /* wrappers.inside: an Inside (this file's thread-local flag) */
	PyObject *owed_due;    /* carriage.owed.due */
	PyObject *get_state;   /* otel.context.get_state */
	PyObject *get_current; /* opentelemetry.context.get_current */
	PyObject *context_var; /* the ContextVar get_current() reads, or None: then get_current() is called */
	PyObject *recorder;    /* recorder.recorder */
	PyObject *error_span;  /* opspans.error_span(number, err) */
	PyObject *release;     /* opspans.release() */
	PyObject *count;       /* counts.count(name) */
	PyObject *tail;        /* wrappers.traced(spec, reader, original, info, seq, asynchronous, args, kwargs) */
	PyObject *world;       /* a weak reference to c10d._world (its default_pg: the group None means): torch's
				  groups are not kept alive by us past the interpreter's end */
	PyObject *target;      /* (stamp, mapping) -> (cmap address, counter address, keep) or None */
	PyObject *tensor_type, *parameter_type;
	PyObject *groups;      /* weakref(process group) -> (info, seq iterator, group index, rank, ranks) */
	long long release_at;
	oprec_start_fn start;
	oprec_end_fn end;
	/* The native target last resolved: the stamp and mapping it is for, what keeps them alive. */
	PyObject *t_stamp, *t_mapping, *t_keep;
	const void *t_cmap;
	int64_t *t_cell;
	unsigned long long fast, slow;
	unsigned long long overwritten; /* records this begin overwrote never exported (Recorder._overwriting's n=1) */
	/* Read at each op without an attribute lookup: the recorder's ring as it last published it (checked
	 * then, its mask with it), its counters (a Counts), the group entry last found and its key. */
	PyObject *ring, *counts, *last_key, *last_entry;
	long long ring_mask;
	/* configure_p2p(): p2p.native_tail(spec, reader, original, info, seq, args, kwargs), and a recorded
	 * receive's ambiguity tracking: p2p.native_posted(info, number, tag), p2p._completed(posted),
	 * p2p.released(posted) */
	PyObject *p2p_tail, *recv_posted, *recv_completed, *recv_released;
} g;

/* Recorder.issued and .ended where the extension is built (recorder.py's properties read them): two ints the C
 * call reads and writes at each op, rather than two attributes it reads and sets (a new int each). */
typedef struct {
	PyObject_HEAD
	long long issued, ended;
} Counts;

static PyObject *s_active, *s_sdk_spans, *s_carriage, *s_retain, *s_clock, *s_stamp, *s_raw_mapping, *s_acquire,
	*s_release, *s_lamport, *s_saturate, *s_default_pg, *s_nbytes, *s_is_cpu, *s_op_attr,
	*s_trace_failed, *s_ring, *s_owed_list, *s_payer, *s_global_state, *s_world_pg, *s_next_p2p;

/* An interrupt (KeyboardInterrupt, SystemExit: not an Exception) met while tracing, held until the call
 * returns, as the Python wrapper lets one out; any other error is tracing's and is dropped. */
typedef struct {
	PyObject *type, *value, *tb;
} Held;

/* wrappers.settings as the C call reads it, copied by settings_changed() (which Settings.__setattr__ calls):
 * an op reads four ints, not four attributes. valid 0: read the attributes (not copied, or a copy failed). */
static struct {
	int valid, active, sdk_spans, carriage_op, carriage_side, retain_export;
} now;

/* True while this thread runs a traced op (wrappers.inside, an Inside): a thread-local flag rather than a
 * ContextVar, whose set and reset allocate an op. An op never yields to another context of its thread (it is
 * one synchronous call), so the two say the same: code run on the thread during the op is inside it. */
static _Thread_local int inside_now;

static void swallow(Held *h)
{
	if (!PyErr_Occurred())
		return;
	if (PyErr_ExceptionMatches(PyExc_Exception) || h->type != NULL) {
		PyErr_Clear();
		return;
	}
	PyErr_Fetch(&h->type, &h->value, &h->tb);
}

/* An attribute as int64; -1 with an error set when it is not one. */
static int attr_i64(PyObject *obj, PyObject *name, long long *out)
{
	PyObject *v = PyObject_GetAttr(obj, name);
	if (v == NULL)
		return -1;
	*out = PyLong_AsLongLong(v);
	Py_DECREF(v);
	return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* The recorder's Counts (configure() checked its type). */
#define COUNTS ((Counts *)g.counts)

/* The type of one wrapped entry point. */
typedef struct {
	PyObject_HEAD
	PyObject *original, *slow, *spec, *reader, *name;
	PyObject *group_name, *group_default, *data_name, *data_default, *async_name, *async_default;
	PyObject *root_name, *root_default, *group_root_name, *group_root_default, *tag_name, *tag_default;
	Py_ssize_t group_pos, data_pos, async_pos, root_pos, group_root_pos, tag_pos;
	long long op_index;
	int has_data, data_list, has_async, has_root, has_group_root, root_data_only, has_tag;
	int p2p; /* P2P_SEND, P2P_RECV: a blocking point-to-point op (its root: the peer); 0: a collective */
	PyObject *dict, *weaklist;
	vectorcallfunc vectorcall;
} HostOp;

enum { P2P_SEND = 1, P2P_RECV = 2 };

/* A call as vectorcall passes it: no tuple or dict is made for torch's function (they would be garbage the
 * collector runs for). */
typedef struct {
	PyObject *const *argv;
	size_t nargsf;
	Py_ssize_t nargs;
	PyObject *kwnames; /* NULL or a tuple of the keyword names, their values after the positional ones */
} Call;

/* The argument ``name`` as Reader.get reads it (keyword, else position, else default): borrowed. */
static PyObject *arg_of(const Call *c, Py_ssize_t pos, PyObject *name, PyObject *deflt)
{
	if (c->kwnames != NULL && name != NULL) {
		Py_ssize_t n = PyTuple_GET_SIZE(c->kwnames);
		for (Py_ssize_t i = 0; i < n; i++) { /* keyword names are interned: identity first */
			PyObject *k = PyTuple_GET_ITEM(c->kwnames, i);
			if (k == name || PyUnicode_Compare(k, name) == 0)
				return c->argv[c->nargs + i];
		}
		if (PyErr_Occurred())
			return NULL;
	}
	if (pos >= 0 && pos < c->nargs)
		return c->argv[pos];
	return deflt;
}

/* 1 when t is a plain CPU tensor, adding its bytes to *nbytes; 0 when the fast path does not take it. */
static int cpu_tensor_bytes(PyObject *t, int check_device, long long *nbytes)
{
	if (Py_TYPE(t) != (PyTypeObject *)g.tensor_type && Py_TYPE(t) != (PyTypeObject *)g.parameter_type)
		return 0;
	if (check_device) {
		PyObject *cpu = PyObject_GetAttr(t, s_is_cpu);
		if (cpu == NULL)
			return -1;
		int is_cpu = cpu == Py_True;
		Py_DECREF(cpu);
		if (!is_cpu)
			return 0;
	}
	long long n;
	if (attr_i64(t, s_nbytes, &n) < 0)
		return -1;
	*nbytes += n;
	return 1;
}

/* The op's bytes (-1: no data argument), as wrappers.op_facts counts them: 1; 0 not taken; -1 error. */
static int data_bytes(HostOp *self, const Call *c, long long *nbytes)
{
	*nbytes = -1;
	if (!self->has_data)
		return 1;
	PyObject *data = arg_of(c, self->data_pos, self->data_name, self->data_default);
	if (data == NULL)
		return PyErr_Occurred() ? -1 : 0;
	*nbytes = 0;
	if (!self->data_list)
		return cpu_tensor_bytes(data, 1, nbytes);
	if (!PyList_CheckExact(data) && !PyTuple_CheckExact(data))
		return 0;
	/* (a tensor's attributes may run Python, under a TorchFunctionMode: the size is read again each time) */
	for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(data); i++) {
		PyObject *t = Py_NewRef(PySequence_Fast_GET_ITEM(data, i));
		int rc = cpu_tensor_bytes(t, i == 0, nbytes);
		Py_DECREF(t);
		if (rc <= 0)
			return rc;
	}
	return 1;
}

/* A module global of fn's module (borrowed; NULL, no error, when fn is not a Python function or lacks it): what
 * a one-line Python function would return, read without calling it (a Python call an op is ~0.1 µs). */
static PyObject *global_of(PyObject *fn, PyObject *name)
{
	if (!PyFunction_Check(fn))
		return NULL;
	return PyDict_GetItemWithError(PyFunction_GetGlobals(fn), name);
}

/* carriage.owed.due(): 1 an exchange is owed or being paid, 0 not, -1 error. */
static int owed_is_due(void)
{
	PyObject *owed = global_of(g.owed_due, s_owed_list), *payer = owed != NULL ? global_of(g.owed_due, s_payer) : NULL;
	if (owed != NULL && payer != NULL && PyList_CheckExact(owed))
		return PyList_GET_SIZE(owed) > 0 || payer != Py_None;
	if (PyErr_Occurred())
		return -1;
	PyObject *due = PyObject_CallNoArgs(g.owed_due);
	int is_due = due == NULL ? -1 : PyObject_IsTrue(due);
	Py_XDECREF(due);
	return is_due;
}

/* otel.context.get_state() (a new reference): its _GLOBAL once made, else the call (which makes it). */
static PyObject *current_state(void)
{
	PyObject *state = global_of(g.get_state, s_global_state);
	if (state != NULL && state != Py_None)
		return Py_NewRef(state);
	if (PyErr_Occurred())
		return NULL;
	return PyObject_CallNoArgs(g.get_state);
}

/* The group's entry (a new reference) when it is one the Python body registered; NULL (no error) when not. */
static PyObject *group_entry(HostOp *self, const Call *c)
{
	PyObject *group = arg_of(c, self->group_pos, self->group_name, self->group_default);
	if (group == NULL)
		return NULL;
	PyObject *world = group == Py_None ? PyWeakref_GetObject(g.world) : NULL;
	if (group == Py_None && (world == NULL || world == Py_None))
		return NULL;
	PyObject *pg = NULL;
	if (group != Py_None) {
		pg = Py_NewRef(group);
	} else if ((pg = PyObject_GetAttr(world, s_world_pg)) == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
		PyErr_Clear(); /* the attribute behind torch's default_pg property (a Python call), where it has one */
		pg = PyObject_GetAttr(world, s_default_pg);
	}
	if (pg == NULL)
		return NULL;
	PyObject *entry = NULL;
	if (g.last_key != NULL && PyWeakref_GET_OBJECT(g.last_key) == pg) { /* (a dead group's key holds None) */
		entry = Py_NewRef(g.last_entry);
	} else if (pg != Py_None) {
		PyObject *key = PyWeakref_NewRef(pg, NULL);
		if (key != NULL) {
			entry = PyDict_GetItemWithError(g.groups, key);
			Py_XINCREF(entry); /* held before pg goes: its last reference may run Python (weakref callbacks) */
			if (entry != NULL) {
				Py_XSETREF(g.last_key, Py_NewRef(key));
				Py_XSETREF(g.last_entry, Py_NewRef(entry));
			}
			Py_DECREF(key);
		}
	}
	Py_DECREF(pg);
	return entry;
}

/* Where a record's reading is written from: the mapping's struct tt_clock_map (NULL: a clock without a
 * mapping, read the Python way), the Lamport counter, and what keeps both alive (a new reference). */
typedef struct {
	const void *cmap;
	int64_t *cell;
	PyObject *keep;
} Target;

/* The current clock and stamp and the native target for them. 1 found (new references in *clock, *stamp and
 * t->keep); 0 the fast path does not apply (no clock yet, a stamp in Python); -1 error. On 0 and -1 all three
 * are NULL. */
static int resolve(PyObject **clock, PyObject **stamp, Target *t)
{
	PyObject *mapping = NULL;
	int rc = -1;
	*clock = *stamp = NULL;
	t->keep = NULL;
	PyObject *state = current_state();
	if (state == NULL)
		return -1;
	*clock = PyObject_GetAttr(state, s_clock);
	*stamp = *clock != NULL ? PyObject_GetAttr(state, s_stamp) : NULL;
	Py_DECREF(state);
	if (*stamp == NULL)
		goto out;
	rc = 0;
	if (*clock == Py_None)
		goto out;
	mapping = PyObject_GetAttr(*clock, s_raw_mapping);
	if (mapping == NULL) {
		if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
			rc = -1;
			goto out;
		}
		PyErr_Clear();
		mapping = Py_NewRef(Py_None);
	}
	if (*stamp != g.t_stamp || mapping != g.t_mapping) {
		PyObject *found = PyObject_CallFunctionObjArgs(g.target, *stamp, mapping, NULL);
		unsigned long long cmap, cell;
		PyObject *keep;
		if (found == NULL || found == Py_None || !PyArg_ParseTuple(found, "KKO", &cmap, &cell, &keep)) {
			rc = found == Py_None ? 0 : -1;
			Py_XDECREF(found);
			goto out;
		}
		Py_XSETREF(g.t_keep, Py_NewRef(keep));
		Py_DECREF(found);
		Py_XSETREF(g.t_stamp, Py_NewRef(*stamp));
		Py_XSETREF(g.t_mapping, Py_NewRef(mapping));
		g.t_cmap = (const void *)(uintptr_t)cmap;
		g.t_cell = (int64_t *)(uintptr_t)cell;
	}
	/* this call's own copy: another thread may replace the cache while Python runs before the write */
	t->cmap = g.t_cmap;
	t->cell = g.t_cell;
	t->keep = Py_NewRef(g.t_keep);
	rc = 1;
out:
	Py_XDECREF(mapping);
	if (rc != 1) {
		Py_CLEAR(*clock);
		Py_CLEAR(*stamp);
	}
	return rc;
}

/* What resolve() handed out, given back. */
static void resolved_done(PyObject *clock, PyObject *stamp, Target *t)
{
	Py_DECREF(clock);
	Py_DECREF(stamp);
	Py_DECREF(t->keep);
}

static void saturated(PyObject *stamp, Held *h)
{
	PyObject *lamport = PyObject_GetAttr(stamp, s_lamport);
	PyObject *r = lamport != NULL ? PyObject_CallMethodNoArgs(lamport, s_saturate) : NULL;
	Py_XDECREF(r);
	Py_XDECREF(lamport);
	swallow(h);
}

/* The ring's current objects (new references), read once per begin or end as Recorder.begin reads them. */
typedef struct {
	PyObject *ring; /* Recorder.ring, held: the others are borrowed from it */
	PyObject *states, *buffer, *lock, *numbers, *parents;
	long long mask;
} Ring;

static int ring_of(Ring *r)
{
	/* (state, buffer, _slot_lock, mask, numbers, parents), replaced whole by a resize or a fork, which publish
	 * it (ring_published checks it then); held for the op: Python run meanwhile may publish another */
	if (g.ring == NULL) {
		PyErr_SetString(PyExc_TypeError, "tempotrace: no ring published to the C call");
		return -1;
	}
	r->ring = Py_NewRef(g.ring);
	r->states = PyTuple_GET_ITEM(r->ring, 0);
	r->buffer = PyTuple_GET_ITEM(r->ring, 1);
	r->lock = PyTuple_GET_ITEM(r->ring, 2);
	r->numbers = PyTuple_GET_ITEM(r->ring, 4);
	r->parents = PyTuple_GET_ITEM(r->ring, 5);
	r->mask = g.ring_mask;
	return 0;
}

static void ring_done(Ring *r)
{
	Py_DECREF(r->ring);
}

/* The ring read, its lock taken, and the ring still the one published (a resize replaces it under the lock:
 * a caller that read the old one reads again). 0 held; -1 not (nothing held). */
static int ring_locked(Ring *r, Held *h)
{
	for (int tries = 0; tries < 4; tries++) {
		if (ring_of(r) < 0) {
			swallow(h);
			return -1;
		}
		if (call_lock(r->lock, s_acquire) < 0) {
			swallow(h);
			ring_done(r);
			return -1;
		}
		if (r->ring == g.ring)
			return 0;
		if (call_lock(r->lock, s_release) < 0)
			swallow(h);
		ring_done(r);
	}
	return -1;
}

/* Under the lock: a slot this begin marked WRITING goes back to the op it held (Recorder._start_words). */
static void give_back(Ring *r, Py_ssize_t slot, int held, Held *h)
{
	if (call_lock(r->lock, s_acquire) < 0) {
		swallow(h);
		return;
	}
	if (slot < PyByteArray_GET_SIZE(r->states) && PyByteArray_AS_STRING(r->states)[slot] == WRITING) {
		PyByteArray_AS_STRING(r->states)[slot] = (char)held;
		PyObject *c = PyObject_CallMethod(g.recorder, "_overwriting", "iin", held, -1, slot);
		Py_XDECREF(c);
		swallow(h);
	}
	if (call_lock(r->lock, s_release) < 0)
		swallow(h);
}

/* Recorder.begin: the op's number, -1 when no record was made (the tail then makes its span). */
static long long begin(PyObject *clock, PyObject *stamp, const Target *t, long long facts, long long seq,
		       long long nbytes, long long root, Held *h)
{
	Ring r;
	long long number = -1;
	if (ring_locked(&r, h) < 0)
		return -1;
	PyObject *num = PyIter_Next(r.numbers);
	if (num != NULL) {
		number = PyLong_AsLongLong(num);
		Py_DECREF(num);
	}
	swallow(h);
	Py_ssize_t slot = (Py_ssize_t)(number & r.mask);
	int held = EMPTY;
	if (number < 0 || slot >= PyByteArray_GET_SIZE(r.states)) {
		number = -1;
	} else {
		char *states = PyByteArray_AS_STRING(r.states);
		held = (unsigned char)states[slot];
		if (held == DUMPED || held == OPEN) { /* an open op: set aside there while there is room (else lost,
							  counted there; a dumped one's end apart) */
			PyObject *c = PyObject_CallMethod(g.recorder, "_overwriting", "iin", held, 1, slot);
			Py_XDECREF(c);
			swallow(h);
		} else if (held != EMPTY) { /* an op never exported (the ring's steady state under retain="ring"): counted
					     here, read by Recorder.overwritten and carriage_counts() (no Python call an op) */
			g.overwritten++;
		}
		PyByteArray_AS_STRING(r.states)[slot] = WRITING;
	}
	if (call_lock(r.lock, s_release) < 0) {
		swallow(h);
		number = -1; /* (cannot happen: the lock is held) */
		goto out;
	}
	if (number < 0)
		goto out;
	Py_ssize_t base = slot * RECORD_BYTES;
	int rc = -EAGAIN;
	if (t->cmap != NULL && base + RECORD_BYTES <= PyByteArray_GET_SIZE(r.buffer))
		rc = g.start(t->cmap, t->cell, PyByteArray_AS_STRING(r.buffer) + base, number, facts, seq, nbytes, root);
	if (rc == 1)
		saturated(stamp, h);
	if (rc < 0) { /* no mapping, or the native read refused: the recorder's own reading (it gives the slot back) */
		PyObject *ok = PyObject_CallMethod(g.recorder, "_start_words", "OOOnLLLLLni", clock, stamp, r.buffer,
						   base, number, facts, seq, nbytes, root, slot, held);
		int wrote = ok != NULL && PyObject_IsTrue(ok) == 1;
		Py_XDECREF(ok);
		if (!wrote) {
			if (ok == NULL) { /* the call itself failed: the slot is given back here */
				swallow(h);
				give_back(&r, slot, held, h);
			}
			swallow(h);
			number = -1;
			goto out;
		}
	}
	/* the parent: the context the op began in (its span is looked up when the record becomes one) */
	PyObject *parents = r.parents;
	if (slot < PyList_GET_SIZE(parents)) {
		PyObject *context = NULL;
		if (g.context_var == Py_None)
			context = PyObject_CallNoArgs(g.get_current);
		else if (PyContextVar_Get(g.context_var, NULL, &context) < 0)
			context = NULL;
		if (context != NULL)
			PyList_SetItem(parents, slot, context); /* (takes the reference) */
	}
	swallow(h);
	if (slot < PyByteArray_GET_SIZE(r.states))
		PyByteArray_AS_STRING(r.states)[slot] = OPEN;
	if (number >= COUNTS->issued)
		COUNTS->issued = number + 1;
out:
	ring_done(&r);
	return number;
}

/* Whether slot holds op number in one of the two states given. */
static int holds(Ring *r, Py_ssize_t slot, long long number, int a, int b)
{
	Py_ssize_t base = slot * RECORD_BYTES;
	if (slot >= PyByteArray_GET_SIZE(r->states) || base + RECORD_BYTES > PyByteArray_GET_SIZE(r->buffer))
		return 0;
	int s = (unsigned char)PyByteArray_AS_STRING(r->states)[slot];
	return (s == a || s == b) && le64(PyByteArray_AS_STRING(r->buffer) + base) == number;
}

/* Recorder.end(number): 1 ended (*ended: the recorder's count of ended ops after it, -1 when not); 0 not (the
 * ring moved on, the clock failed: as there). The end is read with
 * the clock, counter and mapping its start was (an op's two readings from one source); a mapping that expired
 * meanwhile refuses, and the recorder's Python reading takes it from the source as it is now. */
static int end(long long number, int completion, PyObject *clock, PyObject *stamp, const Target *t, Held *h,
	       long long *ended)
{
	*ended = -1;
	Ring r;
	int ok = 0, taken = 0, rc = -EAGAIN;
	if (ring_locked(&r, h) < 0)
		return 0;
	Py_ssize_t slot = (Py_ssize_t)(number & r.mask), base = slot * RECORD_BYTES;
	if (holds(&r, slot, number, OPEN, DUMPED)) {
		taken = 1;
		/* the native reading is pure C (no Python, the GIL held): made under the lock, one section, not two */
		if (t->cmap != NULL)
			rc = g.end(t->cmap, t->cell, PyByteArray_AS_STRING(r.buffer) + base + START_BYTES, completion);
		PyByteArray_AS_STRING(r.states)[slot] = rc >= 0 ? ENDED : ENDING;
	}
	if (call_lock(r.lock, s_release) < 0) {
		swallow(h);
		goto out;
	}
	if (!taken) { /* the ring came round to it while it ran: set aside, perhaps (Recorder.end_aside) */
		PyObject *res = PyObject_CallMethod(g.recorder, "end_aside", "Li", number, completion);
		ok = res != NULL && PyObject_IsTrue(res) == 1;
		Py_XDECREF(res);
		swallow(h);
		if (ok)
			*ended = COUNTS->ended; /* (end_aside counted it) */
		goto out;
	}
	if (rc == 1)
		saturated(stamp, h);
	ok = rc >= 0;
	if (!ok) { /* the recorder's own reading, outside the lock (it counts a failure), then the state */
		PyObject *res = PyObject_CallMethod(g.recorder, "_end_words", "OOOni", clock, stamp, r.buffer,
						    base + START_BYTES, completion);
		ok = res != NULL && PyObject_IsTrue(res) == 1;
		Py_XDECREF(res);
		swallow(h);
		if (call_lock(r.lock, s_acquire) < 0) { /* (cannot happen short of an interrupt: the slot stays ENDING) */
			swallow(h);
			ok = 0;
			goto out;
		}
		if (!holds(&r, slot, number, ENDING, ENDING))
			ok = 0; /* a begin took the slot meanwhile (a ring smaller than the ops in flight) */
		else
			PyByteArray_AS_STRING(r.states)[slot] = ok ? ENDED : EMPTY;
		if (call_lock(r.lock, s_release) < 0)
			swallow(h);
	}
	if (ok)
		*ended = ++COUNTS->ended;
out:
	ring_done(&r);
	return ok;
}

/* An attribute of settings compared: 1 true (truthy, or equal to the ASCII text), 0 not, -1 error. */
static int setting(PyObject *name, const char *text)
{
	PyObject *v = PyObject_GetAttr(g.settings, name);
	if (v == NULL)
		return -1;
	int r = text == NULL ? PyObject_IsTrue(v) : (PyUnicode_Check(v) && PyUnicode_CompareWithASCIIString(v, text) == 0);
	Py_DECREF(v);
	return r;
}

/* An argument as a plain int (borrowed obj: an int or an int-like); 1 read, 0 not one the fast path takes. */
static int as_int(PyObject *v, long long *out)
{
	if (!PyLong_Check(v))
		return 0; /* (int(x) of anything else is the Python wrapper's to try) */
	*out = PyLong_AsLongLong(v);
	if (*out == -1 && PyErr_Occurred()) {
		PyErr_Clear();
		return 0;
	}
	return 1;
}

/* A rooted op's root as a global rank, as wrappers._root reads it (the global one, else the group's root
 * turned into a global rank); *root -1 when neither is given. 1 read; 0 not taken; -1 error. */
static int root_of(HostOp *self, const Call *c, PyObject *ranks, long long *root)
{
	*root = -1;
	if (self->has_root) {
		PyObject *v = arg_of(c, self->root_pos, self->root_name, self->root_default);
		if (v == NULL)
			return PyErr_Occurred() ? -1 : 0;
		if (v != Py_None)
			return as_int(v, root);
	}
	if (self->has_group_root) {
		PyObject *v = arg_of(c, self->group_root_pos, self->group_root_name, self->group_root_default);
		if (v == NULL)
			return PyErr_Occurred() ? -1 : 0;
		long long index;
		if (v == Py_None)
			return 1;
		if (!as_int(v, &index) || index < 0 || index >= PyTuple_GET_SIZE(ranks))
			return 0; /* (a negative or wrong group rank: the Python wrapper, and torch, say what it is) */
		return as_int(PyTuple_GET_ITEM(ranks, index), root);
	}
	return 1;
}

/* A point-to-point op's tag, as p2p.send reads it (None: 0); 1 when it and the peer fit a record's root word
 * (recorder.p2p_word), 0 when not (an any-source receive, a send torch will refuse: the Python wrapper's). */
static int p2p_tag(HostOp *self, const Call *c, long long peer, long long *tag)
{
	*tag = 0;
	if (peer < 0 || peer >= (1LL << 31))
		return 0;
	PyObject *v = self->has_tag ? arg_of(c, self->tag_pos, self->tag_name, self->tag_default) : Py_None;
	if (v == NULL)
		return PyErr_Occurred() ? -1 : 0;
	if (v != Py_None && !as_int(v, tag))
		return 0;
	return *tag >= -(1LL << 31) && *tag < (1LL << 31);
}

/* The fast path's preconditions; 1: take it, with *entry, the bytes, *clock, *stamp and t->keep (new
 * references); 0 or -1 (an error set): not taken, nothing held. */
static int fast_case(HostOp *self, const Call *c, PyObject **entry, long long *nbytes, long long *root,
		     long long *tag, PyObject **clock, PyObject **stamp, Target *t)
{
	if (g.settings == NULL || (self->p2p && g.p2p_tail == NULL))
		return 0;
	int rc;
	if (now.valid) {
		if (!now.active || now.sdk_spans || now.carriage_op || (self->p2p && now.carriage_side))
			return 0;
	} else {
		if ((rc = setting(s_active, NULL)) != 1)
			return rc;
		if ((rc = setting(s_sdk_spans, NULL)) != 0 || (rc = setting(s_carriage, "op")) != 0)
			return rc < 0 ? -1 : 0;
		if (self->p2p && (rc = setting(s_carriage, "step+p2p")) != 0)
			return rc < 0 ? -1 : 0;
	}
	int is_due = owed_is_due(); /* an owed exchange goes first: the Python body pays it */
	if (is_due != 0)
		return is_due < 0 ? -1 : 0;
	if (inside_now)
		return 0;
	if (self->has_async) {
		PyObject *a = arg_of(c, self->async_pos, self->async_name, self->async_default);
		if (a == NULL)
			return PyErr_Occurred() ? -1 : 0;
		int asynchronous = PyObject_IsTrue(a);
		if (asynchronous != 0)
			return asynchronous < 0 ? -1 : 0;
	}
	PyObject *found = group_entry(self, c);
	if (found == NULL)
		return PyErr_Occurred() ? -1 : 0;
	if (!PyTuple_CheckExact(found) || PyTuple_GET_SIZE(found) != 5 || !PyTuple_CheckExact(PyTuple_GET_ITEM(found, 4))) {
		Py_DECREF(found);
		return 0;
	}
	long long rank;
	rc = root_of(self, c, PyTuple_GET_ITEM(found, 4), root);
	if (rc == 1 && !as_int(PyTuple_GET_ITEM(found, 3), &rank))
		rc = 0;
	if (rc == 1 && self->p2p) /* the peer below the tag in the root's word (recorder.p2p_word): else Python's */
		rc = p2p_tag(self, c, *root, tag);
	/* wrappers.op_facts: only the root passes a scatter's data, so another rank's bytes are 0 (and its data
	 * argument, usually None, is read only for its device) */
	int others = self->root_data_only && *root != rank;
	if (rc == 1 && others && arg_of(c, self->data_pos, self->data_name, self->data_default) == Py_None)
		*nbytes = 0;
	else if (rc == 1)
		rc = data_bytes(self, c, nbytes);
	if (rc == 1 && others)
		*nbytes = 0;
	if (rc == 1)
		rc = resolve(clock, stamp, t);
	if (rc == 1)
		*entry = found;
	else
		Py_DECREF(found);
	return rc;
}

/* The call's result, unless an interrupt was held: then that, as the Python wrapper would have let it out. */
static PyObject *returned(PyObject *result, Held *h)
{
	if (h->type == NULL)
		return result;
	Py_XDECREF(result);
	PyErr_Restore(h->type, h->value, h->tb);
	return NULL;
}

/* What a held interrupt comes to when torch's own exception wins over it. */
static void held_drop(Held *h)
{
	Py_CLEAR(h->type);
	Py_CLEAR(h->value);
	Py_CLEAR(h->tb);
}

/* torch's function as the Python wrapper calls it: ``inside`` set; its exception marked as an op's (step()
 * knows it came from torch), op ``number``'s error span made while ``inside`` is still set (-1: no record),
 * and winning over a held interrupt; no frame of ours in its traceback. */
static PyObject *call_op(HostOp *self, const Call *c, long long number, Held *h)
{
	int was_inside = inside_now;
	inside_now = 1;
	PyObject *result = PyObject_Vectorcall(self->original, c->argv, c->nargsf, c->kwnames);
	PyObject *type = NULL, *exc = NULL, *tb = NULL;
	if (result == NULL) {
		PyErr_Fetch(&type, &exc, &tb);
		PyErr_NormalizeException(&type, &exc, &tb);
		if (exc != NULL && tb != NULL)
			PyException_SetTraceback(exc, tb);
		if (exc != NULL) {
			if (PyObject_SetAttr(exc, s_op_attr, self->name) < 0)
				PyErr_Clear();
			if (number >= 0) {
				PyObject *n = PyLong_FromLongLong(number);
				PyObject *r = n != NULL ? PyObject_CallFunctionObjArgs(g.error_span, n, exc, NULL) : NULL;
				Py_XDECREF(r);
				Py_XDECREF(n);
				PyErr_Clear();
			}
		}
	}
	inside_now = was_inside;
	if (result == NULL) {
		held_drop(h);
		PyErr_Restore(type, exc, tb);
	}
	return result;
}

/* torch's function, untraced, once its seq is taken and nothing could be recorded (cannot happen short of
 * memory). */
static PyObject *call_untraced(HostOp *self, const Call *c, Held *h)
{
	PyObject *result = call_op(self, c, -1, h);
	return result != NULL ? returned(result, h) : NULL;
}

/* The rest of the Python body (wrappers._tail; a point-to-point op's: p2p.native_tail), given the call as a
 * tuple and a dict (a rare case); torch's function untraced when even those cannot be made. */
static PyObject *call_tail(HostOp *self, const Call *c, PyObject *info, PyObject *seq, Held *h)
{
	PyObject *args = PyTuple_New(c->nargs), *kwargs = PyDict_New(), *result = NULL;
	if (args == NULL || kwargs == NULL)
		goto untraced;
	for (Py_ssize_t i = 0; i < c->nargs; i++)
		PyTuple_SET_ITEM(args, i, Py_NewRef(c->argv[i]));
	Py_ssize_t nk = c->kwnames != NULL ? PyTuple_GET_SIZE(c->kwnames) : 0;
	for (Py_ssize_t i = 0; i < nk; i++)
		if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(c->kwnames, i), c->argv[c->nargs + i]) < 0)
			goto untraced;
	if (self->p2p)
		result = PyObject_CallFunctionObjArgs(g.p2p_tail, self->spec, self->reader, self->original, info, seq,
						      args, kwargs, NULL);
	else
		result = PyObject_CallFunctionObjArgs(g.tail, self->spec, self->reader, self->original, info, seq,
						      Py_False, args, kwargs, NULL);
	Py_DECREF(args);
	Py_DECREF(kwargs);
	return returned(result, h);
untraced:
	swallow(h);
	Py_XDECREF(args);
	Py_XDECREF(kwargs);
	return call_untraced(self, c, h);
}

/* After torch returned: op ``number``'s end, then its span made once RELEASE_AT ended ops wait (retain="export"),
 * as opspans.end_op does; the result handed back (or a held interrupt). Takes clock, stamp and t->keep. */
static PyObject *ended_op(long long number, PyObject *clock, PyObject *stamp, Target *t, Held *h, PyObject *result)
{
	long long ended;
	int ended_ok = end(number, 1, clock, stamp, t, h, &ended);
	resolved_done(clock, stamp, t);
	if (ended_ok) {
		int export = now.valid ? now.retain_export : setting(s_retain, "export");
		swallow(h);
		if (export == 1 && ended >= g.release_at) {
			PyObject *r = PyObject_CallNoArgs(g.release);
			if (r == NULL && PyErr_ExceptionMatches(PyExc_Exception)) {
				PyErr_Clear();
				PyObject *k = PyObject_CallOneArg(g.count, s_trace_failed);
				Py_XDECREF(k);
			}
			Py_XDECREF(r);
		}
		swallow(h);
	}
	return returned(result, h);
}

/* fn(arg) for tracing's sake, torch's exception (if one is set) kept as it is; any error of fn's dropped (an
 * interrupt held). */
static void call_aside(PyObject *fn, PyObject *arg, Held *h)
{
	PyObject *type, *value, *tb;
	PyErr_Fetch(&type, &value, &tb);
	PyObject *r = PyObject_CallOneArg(fn, arg);
	Py_XDECREF(r);
	if (type != NULL) {
		PyErr_Clear();
		PyErr_Restore(type, value, tb);
	} else {
		swallow(h);
	}
}

/* A blocking send or receive with its peer named, on a registered host group, carrying nothing (p2p.send and
 * p2p.receive's recorded case): the p2p seq taken from the group (GroupInfo.next_p2p), the record's root word
 * the peer below the tag; a receive tracked for ambiguity (spec/torch.md §2) from before torch posts it until it
 * returned, by p2p's own calls. Takes entry, clock, stamp and t->keep. */
static PyObject *p2p_call(HostOp *self, const Call *c, PyObject *entry, long long nbytes, long long peer,
			  long long tag, PyObject *clock, PyObject *stamp, Target *t, Held *h)
{
	PyObject *info = Py_NewRef(PyTuple_GET_ITEM(entry, 0));
	long long rank = PyLong_AsLongLong(PyTuple_GET_ITEM(entry, 3)), gi = PyLong_AsLongLong(PyTuple_GET_ITEM(entry, 2));
	Py_DECREF(entry);
	int sends = self->p2p == P2P_SEND;
	PyObject *a[4] = {info, PyLong_FromLongLong(sends ? rank : peer), PyLong_FromLongLong(sends ? peer : rank),
			  PyLong_FromLongLong(tag)};
	PyObject *seq_obj = NULL;
	if (a[1] != NULL && a[2] != NULL && a[3] != NULL && !PyErr_Occurred())
		seq_obj = PyObject_VectorcallMethod(s_next_p2p, a, 4, NULL);
	for (int i = 1; i < 4; i++)
		Py_XDECREF(a[i]);
	long long seq = seq_obj != NULL ? PyLong_AsLongLong(seq_obj) : -1;
	if (seq_obj == NULL || PyErr_Occurred()) { /* (no seq: cannot happen short of memory) the op runs untraced */
		swallow(h);
		Py_XDECREF(seq_obj);
		Py_DECREF(info);
		resolved_done(clock, stamp, t);
		return call_untraced(self, c, h);
	}
	long long word = (long long)(((unsigned long long)tag << 32) | (unsigned long long)peer); /* p2p_word */
	long long number = begin(clock, stamp, t, self->op_index | (gi << 16), seq, nbytes, word, h);
	if (number < 0) { /* no record: p2p's body makes the op's span, with this seq */
		resolved_done(clock, stamp, t);
		PyObject *result = call_tail(self, c, info, seq_obj, h);
		Py_DECREF(seq_obj);
		Py_DECREF(info);
		return result;
	}
	Py_DECREF(seq_obj);
	PyObject *posted = NULL;
	if (!sends) { /* before torch posts it (p2p._recorded_receive) */
		posted = PyObject_CallFunction(g.recv_posted, "OLL", info, number, tag);
		swallow(h);
	}
	Py_DECREF(info);
	PyObject *result = call_op(self, c, number, h);
	if (posted != NULL) /* released once it returned, before its record ends (while it can still be marked) */
		call_aside(result != NULL ? g.recv_completed : g.recv_released, posted, h);
	Py_XDECREF(posted);
	if (result == NULL) { /* torch's exception: its span is made */
		resolved_done(clock, stamp, t);
		return NULL;
	}
	return ended_op(number, clock, stamp, t, h, result);
}

static PyObject *hostop_call(HostOp *self, const Call *c)
{
	PyObject *entry = NULL, *clock = NULL, *stamp = NULL;
	Target t = {NULL, NULL, NULL};
	Held h = {NULL, NULL, NULL};
	long long nbytes = -1, root = -1, tag = 0;
	int rc = fast_case(self, c, &entry, &nbytes, &root, &tag, &clock, &stamp, &t);
	if (rc != 1) {
		swallow(&h); /* nothing was taken: the Python wrapper decides, as it would have */
		if (h.type != NULL)
			return returned(NULL, &h);
		g.slow++;
		return PyObject_Vectorcall(self->slow, c->argv, c->nargsf, c->kwnames);
	}
	g.fast++;
	if (self->p2p)
		return p2p_call(self, c, entry, nbytes, root, tag, clock, stamp, &t, &h);
	PyObject *info = Py_NewRef(PyTuple_GET_ITEM(entry, 0));
	PyObject *seq_obj = PyIter_Next(PyTuple_GET_ITEM(entry, 1)); /* counted traced or not: equal on every rank */
	long long seq = seq_obj != NULL ? PyLong_AsLongLong(seq_obj) : -1;
	long long gi = -1, number = -1;
	if (seq_obj != NULL && !PyErr_Occurred())
		gi = PyLong_AsLongLong(PyTuple_GET_ITEM(entry, 2));
	Py_DECREF(entry);
	if (seq_obj == NULL || PyErr_Occurred()) { /* (no seq: cannot happen short of memory) the op runs untraced */
		swallow(&h);
		Py_XDECREF(seq_obj);
		Py_DECREF(info);
		resolved_done(clock, stamp, &t);
		return call_untraced(self, c, &h);
	}
	number = begin(clock, stamp, &t, self->op_index | (gi << 16), seq, nbytes, root, &h);
	if (number < 0) { /* no record: the rest of the Python body makes the op's span, with this seq (the op runs
			     even when an interrupt is held: its seq is taken, the other ranks count on it) */
		resolved_done(clock, stamp, &t);
		PyObject *result = call_tail(self, c, info, seq_obj, &h);
		Py_DECREF(seq_obj);
		Py_DECREF(info);
		return result;
	}
	Py_DECREF(seq_obj);
	Py_DECREF(info);
	PyObject *result = call_op(self, c, number, &h);
	if (result == NULL) { /* torch's exception: its span is made */
		resolved_done(clock, stamp, &t);
		return NULL;
	}
	return ended_op(number, clock, stamp, &t, &h, result);
}

static PyObject *hostop_vectorcall(PyObject *callable, PyObject *const *argv, size_t nargsf, PyObject *kwnames)
{
	Call c = {argv, nargsf, PyVectorcall_NARGS(nargsf), kwnames != NULL && PyTuple_GET_SIZE(kwnames) ? kwnames : NULL};
	return hostop_call((HostOp *)callable, &c);
}

static int hostop_init(HostOp *self, PyObject *args, PyObject *kwargs)
{
	static char *kw[] = {"original", "slow", "spec", "reader", "name", "op_index", "group", "data", "data_list",
			     "async_op", "root", "group_root", "root_data_only", "p2p", "tag", NULL};
	PyObject *original, *slow, *spec, *reader, *name, *group, *data, *async_op, *root = Py_None, *group_root = Py_None;
	PyObject *tag = Py_None;
	if (self->original != NULL) {
		PyErr_SetString(PyExc_TypeError, "HostOp is initialised once");
		return -1;
	}
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOULOOpO|OOpiO", kw, &original, &slow, &spec, &reader, &name,
					 &self->op_index, &group, &data, &self->data_list, &async_op, &root, &group_root,
					 &self->root_data_only, &self->p2p, &tag))
		return -1;
	if (self->p2p != 0 && self->p2p != P2P_SEND && self->p2p != P2P_RECV) {
		PyErr_SetString(PyExc_ValueError, "p2p: 0 (a collective), 1 (a send) or 2 (a receive)");
		return -1;
	}
	/* group, data, async_op: (position or -1, keyword name, default) or None for an argument the op lacks */
	self->original = Py_NewRef(original);
	self->slow = Py_NewRef(slow);
	self->spec = Py_NewRef(spec);
	self->reader = Py_NewRef(reader);
	self->name = Py_NewRef(name);
	struct {
		PyObject *from;
		Py_ssize_t *pos;
		PyObject **name, **deflt;
		int *has;
	} where[] = {{group, &self->group_pos, &self->group_name, &self->group_default, NULL},
		     {data, &self->data_pos, &self->data_name, &self->data_default, &self->has_data},
		     {async_op, &self->async_pos, &self->async_name, &self->async_default, &self->has_async},
		     {root, &self->root_pos, &self->root_name, &self->root_default, &self->has_root},
		     {group_root, &self->group_root_pos, &self->group_root_name, &self->group_root_default,
		      &self->has_group_root},
		     {tag, &self->tag_pos, &self->tag_name, &self->tag_default, &self->has_tag}};
	for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
		*where[i].pos = -1;
		if (where[i].has != NULL)
			*where[i].has = where[i].from != Py_None;
		if (where[i].from == Py_None) {
			if (where[i].has == NULL) {
				PyErr_SetString(PyExc_ValueError, "group: a collective has a group argument");
				return -1;
			}
			continue;
		}
		PyObject *name, *deflt;
		if (!PyArg_ParseTuple(where[i].from, "nUO", where[i].pos, &name, &deflt))
			return -1;
		*where[i].name = Py_NewRef(name);
		*where[i].deflt = Py_NewRef(deflt);
	}
	self->vectorcall = hostop_vectorcall;
	return 0;
}

static int hostop_traverse(HostOp *self, visitproc visit, void *arg)
{
	Py_VISIT(self->original);
	Py_VISIT(self->slow);
	Py_VISIT(self->spec);
	Py_VISIT(self->reader);
	Py_VISIT(self->dict);
	Py_VISIT(self->group_default);
	Py_VISIT(self->data_default);
	Py_VISIT(self->async_default);
	Py_VISIT(self->root_default);
	Py_VISIT(self->group_root_default);
	Py_VISIT(self->tag_default);
	return 0;
}

static int hostop_clear(HostOp *self)
{
	Py_CLEAR(self->original);
	Py_CLEAR(self->slow);
	Py_CLEAR(self->spec);
	Py_CLEAR(self->reader);
	Py_CLEAR(self->name);
	Py_CLEAR(self->dict);
	Py_CLEAR(self->group_name);
	Py_CLEAR(self->group_default);
	Py_CLEAR(self->data_name);
	Py_CLEAR(self->data_default);
	Py_CLEAR(self->async_name);
	Py_CLEAR(self->async_default);
	Py_CLEAR(self->root_name);
	Py_CLEAR(self->root_default);
	Py_CLEAR(self->group_root_name);
	Py_CLEAR(self->group_root_default);
	Py_CLEAR(self->tag_name);
	Py_CLEAR(self->tag_default);
	return 0;
}

static void hostop_dealloc(HostOp *self)
{
	PyObject_GC_UnTrack(self);
	if (self->weaklist != NULL)
		PyObject_ClearWeakRefs((PyObject *)self);
	hostop_clear(self);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyGetSetDef hostop_getset[] = {{"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
				       {NULL}};

static PyTypeObject HostOpType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tempotrace_sdk._opcall.HostOp",
	.tp_basicsize = sizeof(HostOp),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
	.tp_doc = "A traced blocking collective: the common case in C, every other case by the Python wrapper.",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)hostop_init,
	.tp_dealloc = (destructor)hostop_dealloc,
	.tp_traverse = (traverseproc)hostop_traverse,
	.tp_clear = (inquiry)hostop_clear,
	.tp_call = PyVectorcall_Call,
	.tp_vectorcall_offset = offsetof(HostOp, vectorcall),
	.tp_dictoffset = offsetof(HostOp, dict),
	.tp_weaklistoffset = offsetof(HostOp, weaklist),
	.tp_getset = hostop_getset,
};

/* SlotLock (tt_ring.h) as Python takes it: ``with lock:``, acquire() and release(), as a threading.Lock. */
static PyObject *slotlock_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
	SlotLock *self = (SlotLock *)type->tp_alloc(type, 0);
	if (self == NULL)
		return NULL;
	self->lock = PyThread_allocate_lock();
	if (self->lock == NULL) {
		Py_DECREF(self);
		return PyErr_NoMemory();
	}
	return (PyObject *)self;
}

static void slotlock_dealloc(SlotLock *self)
{
	if (self->lock != NULL)
		PyThread_free_lock(self->lock);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *slotlock_acquire(SlotLock *self, PyObject *unused)
{
	slot_lock_take(self);
	Py_RETURN_TRUE;
}

static PyObject *slotlock_release(SlotLock *self, PyObject *unused)
{
	if (!self->held) {
		PyErr_SetString(PyExc_RuntimeError, "release unlocked lock");
		return NULL;
	}
	slot_lock_give(self);
	Py_RETURN_NONE;
}

static PyObject *slotlock_exit(SlotLock *self, PyObject *args)
{
	PyObject *r = slotlock_release(self, NULL);
	if (r == NULL)
		return NULL;
	Py_DECREF(r);
	Py_RETURN_FALSE;
}

static PyObject *slotlock_locked(SlotLock *self, PyObject *unused)
{
	return PyBool_FromLong(self->held);
}

static PyMethodDef slotlock_methods[] = {
	{"acquire", (PyCFunction)slotlock_acquire, METH_NOARGS, "Take the lock, waiting (the GIL released) while held."},
	{"release", (PyCFunction)slotlock_release, METH_NOARGS, "Let the lock go (taken by this thread)."},
	{"locked", (PyCFunction)slotlock_locked, METH_NOARGS, "Whether the lock is held."},
	{"__enter__", (PyCFunction)slotlock_acquire, METH_NOARGS, NULL},
	{"__exit__", (PyCFunction)slotlock_exit, METH_VARARGS, NULL},
	{NULL, NULL, 0, NULL}};

PyTypeObject tt_SlotLockType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tempotrace_sdk._opcall.SlotLock",
	.tp_basicsize = sizeof(SlotLock),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "The recorder's _slot_lock: a lock the C call takes with no Python call (tt_ring.h).",
	.tp_methods = slotlock_methods,
	.tp_new = slotlock_new,
	.tp_dealloc = (destructor)slotlock_dealloc,
};

/* The thread-local flag as wrappers.py reads and sets it: the ContextVar methods it replaces. */
typedef struct {
	PyObject_HEAD
} Inside;

static PyObject *inside_get(PyObject *self, PyObject *unused)
{
	return PyBool_FromLong(inside_now);
}

/* set(value) -> token: the value before (reset(token) puts it back). */
static PyObject *inside_set(PyObject *self, PyObject *value)
{
	int v = PyObject_IsTrue(value);
	if (v < 0)
		return NULL;
	PyObject *token = PyBool_FromLong(inside_now);
	inside_now = v;
	return token;
}

static PyObject *inside_reset(PyObject *self, PyObject *token)
{
	if (!PyBool_Check(token)) {
		PyErr_SetString(PyExc_TypeError, "Inside.reset: a token is what set() returned");
		return NULL;
	}
	inside_now = token == Py_True;
	Py_RETURN_NONE;
}

static PyMethodDef inside_methods[] = {
	{"get", inside_get, METH_NOARGS, "Whether this thread runs a traced op."},
	{"set", inside_set, METH_O, "set(value) -> token: the flag set on this thread; reset(token) undoes it."},
	{"reset", inside_reset, METH_O, "reset(token): the flag as it was before the set() that gave token."},
	{NULL, NULL, 0, NULL}};

static PyTypeObject InsideType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tempotrace_sdk._opcall.Inside",
	.tp_basicsize = sizeof(Inside),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "True while this thread runs a traced op: a thread-local flag with a ContextVar's get/set/reset.",
	.tp_methods = inside_methods,
	.tp_new = PyType_GenericNew,
};

static PyMemberDef counts_members[] = {
	{"issued", T_LONGLONG, offsetof(Counts, issued), 0, "Every op number below this has been taken by a begin."},
	{"ended", T_LONGLONG, offsetof(Counts, ended), 0, "Ops ended since the last take (a release's trigger)."},
	{NULL, 0, 0, 0, NULL}};

static PyTypeObject CountsType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tempotrace_sdk._opcall.Counts",
	.tp_basicsize = sizeof(Counts),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "The recorder's issued and ended counters, as ints the C call reads (recorder.py's properties).",
	.tp_members = counts_members,
	.tp_new = PyType_GenericNew,
};

/* Copies wrappers.settings' four fields the fast path reads (each op then reads ints): called by configure()
 * and by Settings.__setattr__ after each change. A field it cannot read leaves the fast path reading them. */
static PyObject *settings_changed(PyObject *module, PyObject *unused)
{
	now.valid = 0;
	if (g.settings == NULL)
		Py_RETURN_NONE;
	int active = setting(s_active, NULL), sdk_spans = setting(s_sdk_spans, NULL);
	int carriage_op = setting(s_carriage, "op"), retain_export = setting(s_retain, "export");
	int carriage_p2p = setting(s_carriage, "step+p2p");
	if (active < 0 || sdk_spans < 0 || carriage_op < 0 || carriage_p2p < 0 || retain_export < 0) {
		PyErr_Clear();
		Py_RETURN_NONE;
	}
	now.active = active;
	now.sdk_spans = sdk_spans;
	now.carriage_op = carriage_op;
	now.carriage_side = carriage_op || carriage_p2p; /* p2p.SIDE_MODES: a point-to-point op carries a message */
	now.retain_export = retain_export;
	now.valid = 1;
	Py_RETURN_NONE;
}

/* The group entry last found is dropped whenever the registered groups change. */
static void forget_last_group(void)
{
	Py_CLEAR(g.last_key);
	Py_CLEAR(g.last_entry);
}

/* Recorder._publish: the ring the C call reads from now on, when it is configured for this recorder. */
static PyObject *ring_published(PyObject *module, PyObject *recorder)
{
	if (recorder != g.recorder)
		Py_RETURN_NONE;
	Py_CLEAR(g.ring); /* (until this one is checked: an op meanwhile is not recorded into the last) */
	PyObject *ring = PyObject_GetAttr(recorder, s_ring);
	if (ring == NULL)
		return NULL;
	long long mask = -1;
	if (!PyTuple_CheckExact(ring) || PyTuple_GET_SIZE(ring) != 6 ||
	    !PyByteArray_CheckExact(PyTuple_GET_ITEM(ring, 0)) || !PyByteArray_CheckExact(PyTuple_GET_ITEM(ring, 1)) ||
	    !PyLong_Check(PyTuple_GET_ITEM(ring, 3)) || !PyList_CheckExact(PyTuple_GET_ITEM(ring, 5)) ||
	    ((mask = PyLong_AsLongLong(PyTuple_GET_ITEM(ring, 3))) < 0)) {
		Py_DECREF(ring);
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_TypeError, "tempotrace: the recorder's ring is not what the C call reads");
		return NULL;
	}
	g.ring = ring;
	g.ring_mask = mask;
	Py_RETURN_NONE;
}

static PyObject *configure(PyObject *module, PyObject *args, PyObject *kwargs)
{
	static char *kw[] = {"settings", "inside", "owed_due", "get_state", "get_current", "recorder", "error_span",
			     "release", "count", "tail", "world", "target", "tensor_type", "parameter_type",
			     "context_var", "release_at", "start", "end", NULL};
	PyObject *o[15];
	long long release_at;
	unsigned long long start, end_fn;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOOOOOOOOOOLKK", kw, &o[0], &o[1], &o[2], &o[3], &o[4],
					 &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &o[11], &o[12], &o[13], &o[14], &release_at,
					 &start, &end_fn))
		return NULL;
	if (!PyType_Check(o[12]) || !PyType_Check(o[13]) || (o[14] != Py_None && !PyContextVar_CheckExact(o[14])) ||
	    !PyWeakref_CheckRef(o[10]) || start == 0 || end_fn == 0 || !Py_IS_TYPE(o[1], &InsideType)) {
		PyErr_SetString(PyExc_ValueError,
				"configure: tensor types must be types, inside an Inside, start and end addresses");
		return NULL;
	}
	PyObject **slots[] = {&g.settings, &g.inside,  &g.owed_due, &g.get_state, &g.get_current,
			      &g.recorder, &g.error_span, &g.release, &g.count, &g.tail,
			      &g.world,    &g.target,    &g.tensor_type, &g.parameter_type, &g.context_var};
	for (int i = 0; i < 15; i++)
		Py_XSETREF(*slots[i], Py_NewRef(o[i]));
	g.release_at = release_at;
	g.start = (oprec_start_fn)(uintptr_t)start;
	g.end = (oprec_end_fn)(uintptr_t)end_fn;
	Py_CLEAR(g.t_stamp);
	Py_CLEAR(g.t_mapping);
	Py_CLEAR(g.t_keep);
	g.t_cmap = NULL;
	g.t_cell = NULL;
	forget_last_group();
	PyObject *counts = PyObject_GetAttrString(g.recorder, "_counts");
	if (counts == NULL)
		return NULL;
	if (!Py_IS_TYPE(counts, &CountsType)) {
		Py_DECREF(counts);
		PyErr_SetString(PyExc_ValueError, "configure: the recorder's _counts must be an _opcall.Counts");
		return NULL;
	}
	Py_XSETREF(g.counts, counts);
	PyObject *published = ring_published(module, g.recorder);
	if (published == NULL)
		return NULL;
	Py_DECREF(published);
	return settings_changed(module, NULL);
}

/* What a point-to-point op's C call calls (g.p2p_tail and the receive's three): after configure(). */
static PyObject *configure_p2p(PyObject *module, PyObject *args)
{
	PyObject *o[4];
	if (!PyArg_ParseTuple(args, "OOOO", &o[0], &o[1], &o[2], &o[3]))
		return NULL;
	PyObject **slots[] = {&g.p2p_tail, &g.recv_posted, &g.recv_completed, &g.recv_released};
	for (int i = 0; i < 4; i++) {
		if (!PyCallable_Check(o[i])) {
			PyErr_SetString(PyExc_TypeError, "configure_p2p: tail, posted, completed, released are callables");
			return NULL;
		}
	}
	for (int i = 0; i < 4; i++)
		Py_XSETREF(*slots[i], Py_NewRef(o[i]));
	Py_RETURN_NONE;
}

static PyObject *register_group(PyObject *module, PyObject *args)
{
	PyObject *pg, *info, *seqs, *gi, *rank, *ranks;
	if (!PyArg_ParseTuple(args, "OOOO!O!O!", &pg, &info, &seqs, &PyLong_Type, &gi, &PyLong_Type, &rank, &PyTuple_Type,
			      &ranks))
		return NULL;
	/* the groups destroyed since (dead keys: never found again) go now, with what they held */
	PyObject *k, *v, *dead = PyList_New(0);
	Py_ssize_t pos = 0;
	if (dead == NULL)
		return NULL;
	while (PyDict_Next(g.groups, &pos, &k, &v))
		if (PyWeakref_GetObject(k) == Py_None && PyList_Append(dead, k) < 0) {
			Py_DECREF(dead);
			return NULL;
		}
	for (Py_ssize_t i = 0; i < PyList_GET_SIZE(dead); i++)
		if (PyDict_DelItem(g.groups, PyList_GET_ITEM(dead, i)) < 0)
			PyErr_Clear();
	Py_DECREF(dead);
	forget_last_group();
	PyObject *key = PyWeakref_NewRef(pg, NULL);
	if (key == NULL)
		return NULL;
	PyObject *entry = PyTuple_Pack(5, info, seqs, gi, rank, ranks);
	int rc = entry != NULL ? PyDict_SetItem(g.groups, key, entry) : -1;
	Py_DECREF(key);
	Py_XDECREF(entry);
	if (rc < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *forget_groups(PyObject *module, PyObject *unused)
{
	forget_last_group();
	PyDict_Clear(g.groups);
	Py_RETURN_NONE;
}

static PyObject *registered(PyObject *module, PyObject *pg)
{
	PyObject *key = PyWeakref_NewRef(pg, NULL);
	if (key == NULL)
		return NULL;
	int rc = PyDict_Contains(g.groups, key);
	Py_DECREF(key);
	if (rc < 0)
		return NULL;
	return PyBool_FromLong(rc);
}

static PyObject *stats(PyObject *module, PyObject *unused)
{
	return Py_BuildValue("{sKsK}", "fast", g.fast, "slow", g.slow);
}

/* Recorder.begin and .end for the ops Python records (point-to-point, async, a group's first): the C call's own
 * begin and end, for the recorder it is configured with. None where they do not apply (another recorder, no
 * ring, a clock without a native mapping): then Python records it. */
static int resolved_for(PyObject *recorder, PyObject **clock, PyObject **stamp, Target *t)
{
	if (recorder != g.recorder || g.ring == NULL)
		return 0;
	int rc = resolve(clock, stamp, t);
	if (rc < 0) /* (dropped: the Python path reads the clock itself, and counts what fails) */
		PyErr_Clear();
	return rc == 1;
}

static PyObject *record_begin(PyObject *module, PyObject *const *argv, Py_ssize_t nargs)
{
	long long facts, seq, nbytes, root;
	if (nargs != 5) {
		PyErr_SetString(PyExc_TypeError, "record_begin(recorder, facts, seq, nbytes, root)");
		return NULL;
	}
	facts = PyLong_AsLongLong(argv[1]);
	seq = PyLong_AsLongLong(argv[2]);
	nbytes = PyLong_AsLongLong(argv[3]);
	root = PyLong_AsLongLong(argv[4]);
	if (PyErr_Occurred())
		return NULL;
	PyObject *clock, *stamp;
	Target t;
	if (!resolved_for(argv[0], &clock, &stamp, &t))
		Py_RETURN_NONE;
	Held h = {NULL, NULL, NULL};
	long long number = begin(clock, stamp, &t, facts, seq, nbytes, root, &h);
	resolved_done(clock, stamp, &t);
	if (h.type != NULL && number >= 0) { /* the interrupt goes out, the number not: the record with it */
		PyObject *r = PyObject_CallMethod(g.recorder, "discard", "L", number);
		Py_XDECREF(r);
		PyErr_Clear();
	}
	return returned(PyLong_FromLongLong(number), &h);
}

static PyObject *record_end(PyObject *module, PyObject *const *argv, Py_ssize_t nargs)
{
	if (nargs != 3) {
		PyErr_SetString(PyExc_TypeError, "record_end(recorder, number, completion)");
		return NULL;
	}
	long long number = PyLong_AsLongLong(argv[1]);
	long completion = PyLong_AsLong(argv[2]);
	if (PyErr_Occurred())
		return NULL;
	if (completion < 0 || completion > 0xFF) {
		PyErr_SetString(PyExc_ValueError, "completion must be a code 0..255");
		return NULL;
	}
	PyObject *clock, *stamp;
	Target t;
	if (!resolved_for(argv[0], &clock, &stamp, &t))
		Py_RETURN_NONE;
	Held h = {NULL, NULL, NULL};
	long long ended;
	int ok = end(number, (int)completion, clock, stamp, &t, &h, &ended);
	resolved_done(clock, stamp, &t);
	return returned(PyBool_FromLong(ok), &h);
}

static PyObject *overwritten(PyObject *module, PyObject *unused)
{
	return PyLong_FromUnsignedLongLong(g.overwritten);
}

static PyMethodDef methods[] = {
	{"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
	 "Hand over what the fast path calls and reads (tempotrace_sdk/torch/wrappers.py native_wrapper)."},
	{"configure_p2p", configure_p2p, METH_VARARGS,
	 "configure_p2p(tail, posted, completed, released): what a point-to-point op's C call calls."},
	{"register", register_group, METH_VARARGS,
	 "register(pg, info, seq_iterator, group_index, rank, ranks): a host group the fast path may take."},
	{"forget_groups", forget_groups, METH_NOARGS, "Forget every registered group (uninstrument, fork)."},
	{"registered", registered, METH_O, "Whether a process group is registered."},
	{"ring_published", ring_published, METH_O, "Recorder._publish: the ring the C call reads from now on."},
	{"stats", stats, METH_NOARGS, "Calls taken by the fast path and handed to the Python wrapper."},
	{"record_begin", (PyCFunction)(void (*)(void))record_begin, METH_FASTCALL,
	 "record_begin(recorder, facts, seq, nbytes, root): Recorder.begin's number (-1: none), None: Python's."},
	{"record_end", (PyCFunction)(void (*)(void))record_end, METH_FASTCALL,
	 "record_end(recorder, number, completion): Recorder.end's answer, None: Python's."},
	{"overwritten", overwritten, METH_NOARGS, "Records the C call overwrote never exported, since the process began."},
	{"settings_changed", settings_changed, METH_NOARGS,
	 "Copy wrappers.settings' fields the fast path reads (Settings.__setattr__ calls it after each change)."},
	{"encode_ended", (PyCFunction)(void (*)(void))tt_encode_ended, METH_FASTCALL,
	 "Ended op records taken straight into OTLP JSON spans (native/opcall/tt_opspans.h)."},
	{NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tempotrace_sdk._opcall",
				     "A traced blocking host collective in C (spec/torch.md §1.4).", -1, methods};

PyMODINIT_FUNC PyInit__opcall(void)
{
	struct {
		PyObject **s;
		const char *text;
	} names[] = {{&s_active, "active"},
		     {&s_sdk_spans, "sdk_spans"},
		     {&s_carriage, "carriage"},
		     {&s_retain, "retain"},
		     {&s_clock, "_clock"},
		     {&s_stamp, "stamp"},
		     {&s_raw_mapping, "raw_mapping"},
		     {&s_acquire, "acquire"},
		     {&s_release, "release"},
		     {&s_lamport, "lamport"},
		     {&s_saturate, "_saturate"},
		     {&s_default_pg, "default_pg"},
		     {&s_nbytes, "nbytes"},
		     {&s_is_cpu, "is_cpu"},
		     {&s_op_attr, "_tempotrace_torch_op"},
		     {&s_trace_failed, "trace_failed"},
		     {&s_ring, "ring"},
		     {&s_owed_list, "_owed"},
		     {&s_payer, "_payer"},
		     {&s_global_state, "_GLOBAL"},
		     {&s_world_pg, "_default_pg"},
		     {&s_next_p2p, "next_p2p"}};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if ((*names[i].s = PyUnicode_InternFromString(names[i].text)) == NULL)
			return NULL;
	g.groups = PyDict_New();
	if (g.groups == NULL || PyType_Ready(&HostOpType) < 0 || PyType_Ready(&InsideType) < 0 ||
	    PyType_Ready(&tt_SlotLockType) < 0 || PyType_Ready(&CountsType) < 0)
		return NULL;
	PyObject *m = PyModule_Create(&module);
	if (m == NULL)
		return NULL;
	if (PyModule_AddObjectRef(m, "HostOp", (PyObject *)&HostOpType) < 0 ||
	    PyModule_AddObjectRef(m, "Inside", (PyObject *)&InsideType) < 0 ||
	    PyModule_AddObjectRef(m, "SlotLock", (PyObject *)&tt_SlotLockType) < 0 ||
	    PyModule_AddObjectRef(m, "Counts", (PyObject *)&CountsType) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
