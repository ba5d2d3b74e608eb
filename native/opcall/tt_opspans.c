/*
 * tt_opspans.c - ended op records straight into OTLP JSON spans (spec/torch.md §1.4, "Spans from records").
 *
 * Why: under retain="export" every op's span was made as a ReadableSpan
 * (torch/opspans.py make_span, ~12 µs) and encoded by otel/otlp_json.py
 * (~10 µs), ten times the record itself (issue 23, bench_torch_ops). Here a
 * record's span is written as the JSON those two write, in one pass over
 * its 96 octets: what is the same for many records (a group's attributes,
 * an op's name, the parent span, the Resource's needs) comes in already
 * encoded from torch/opspans.py, built once a release by the same encoder.
 * tests/torch/test_op_spans_json.py compares the bytes with that path's.
 *
 * A record whose span needs anything else (a sampler to ask, a leap second
 * or a clock-epoch change near its readings, a value outside the stamps
 * text's digits) is left ENDED for Python, which makes it the old way. The
 * scan follows Recorder.take_ended; the state changes are made under the
 * recorder's _slot_lock, with no Python code run while it is held.
 */
#include "tt_opspans.h"

#include <stdint.h>
#include <string.h>

#include "tt_ring.h"

/* 2^64 / golden ratio (torch/opspans.py _WEYL): a span id is nonce + number * WEYL, never 0. */
#define WEYL 0x9E3779B97F4A7C15ULL

enum {
	KEY_OP, KEY_BYTES, KEY_ROOT, KEY_SEQ, KEY_COMPLETION, KEY_STAMPS, KEY_QUALITY, KEY_UNCERTAINTY,
	KEY_TAG, KEY_PEER, KEY_SRC, KEY_DST, KEY_P2P_SEQ, KEY_AMBIGUOUS, KEY_BATCHED, N_KEYS
};

/* An op's shape (torch/opspans.py _OPS): what its record's seq and root words hold; an async receive's ambiguity
 * mark comes before its completion (its SDK span gets the completion at its end, after any mark). */
enum { COLLECTIVE, SEND, RECV, RECV_ASYNC };

/* A record's flags (torch/recorder.py AMBIGUOUS, BATCHED): the receive overlapped another on its (group, tag); the
 * op was one of a batch_isend_irecv. */
#define AMBIGUOUS_FLAG (1LL << 56)
#define BATCHED_FLAG (1LL << 57)

/* How a candidate's span is written: its parent's (trace id, tail), a root, or not at all. */
enum { LEFT, WITH_PARENT, ROOT, UNSAMPLED };

typedef struct {
	long long number;
	Py_ssize_t slot;
	PyObject *context; /* parents[slot] when scanned; a reference of ours while held is set */
	PyObject *parent;  /* parent_of's answer (borrowed from the cache), for WITH_PARENT */
	int how, held;
	Py_ssize_t epoch; /* which of the config's tails its span carries */
	char rec[RECORD_BYTES];
} Candidate;

/* What parent_of answered per context, each held: a step's ops share one context. */
enum { CACHE = 64 };
typedef struct {
	PyObject *context[CACHE], *answer[CACHE];
	int n;
} Parents;

/* A clock epoch as clocks/domain.py epoch_of tests a reading against it. */
typedef struct {
	long long mid, half, since, limit;
} Window;

enum { MAX_WINDOWS = 64 }; /* domain.py MAX_EPOCHS: beyond it, label_windows gives None */

typedef struct {
	PyObject *groups, *ranks, *ops, *completions, *qualities, *keys, *parent_of, *epochs;
	PyObject *clock; /* epochs()'s answer, ours: (windows or None, tails); None until asked */
	PyObject *tails; /* borrowed from clock */
	uint64_t nonce, nonce_high;
	int roots;
	long long boundary, offset, base;
	Py_ssize_t n_windows; /* 0: no host clock domain (one tail) */
	Py_ssize_t fixed_max; /* what every span may write besides its own group, op, parent and tail */
	Window windows[MAX_WINDOWS];
} Config;

typedef struct {
	char *at, *end;
} Out;

static void put(Out *o, const char *s, Py_ssize_t n)
{
	memcpy(o->at, s, (size_t)n);
	o->at += n;
}

static void put_s(Out *o, const char *s)
{
	put(o, s, (Py_ssize_t)strlen(s));
}

static void put_bytes(Out *o, PyObject *b)
{
	put(o, PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b));
}

static void put_i64(Out *o, long long v)
{
	char digits[24];
	int n = 0;
	unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
	do {
		digits[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u != 0);
	if (v < 0)
		*o->at++ = '-';
	while (n > 0)
		*o->at++ = digits[--n];
}

static void put_hex64(Out *o, uint64_t v)
{
	static const char hex[] = "0123456789abcdef";
	for (int shift = 60; shift >= 0; shift -= 4)
		*o->at++ = hex[(v >> shift) & 0xF];
}

/* An int attribute: key fragment, then {"intValue":"v"}} (Proto3 JSON writes int64 as a string). */
static void put_int_value(Out *o, PyObject *key, long long v)
{
	*o->at++ = ',';
	put_bytes(o, key);
	put_s(o, "{\"intValue\":\"");
	put_i64(o, v);
	put_s(o, "\"}}");
}

static void put_string_value(Out *o, PyObject *key, PyObject *json_text, int comma)
{
	if (comma)
		*o->at++ = ',';
	put_bytes(o, key);
	put_s(o, "{\"stringValue\":");
	put_bytes(o, json_text);
	put_s(o, "}}");
}

static uint64_t span_id_of(const Config *c, long long number)
{
	uint64_t id = c->nonce + (uint64_t)number * WEYL;
	return id != 0 ? id : 1;
}

/* The one epoch a reading can have been taken in (HostDomain.epoch_of), -1 when it fits two or none. */
static Py_ssize_t epoch_of(const Config *c, long long v)
{
	Py_ssize_t found = -1;
	for (Py_ssize_t i = 0; i < c->n_windows; i++) {
		const Window *w = &c->windows[i];
		if (v - w->mid + w->half > w->since && v - w->mid - w->half < w->limit) {
			if (found >= 0)
				return -1;
			found = i;
		}
	}
	return found;
}

/* Whether the span of this record is one this encoder writes, its clock epoch aside (its words alone decide). */
static int encodable(const Config *c, const char *rec)
{
	long long facts = le64(rec + 8), efacts = le64(rec + START_BYTES + 24);
	long long op = facts & 0xFFFF, gi = (facts >> 16) & 0xFFFFFF, source = (facts >> 40) & 0xFF;
	long long quality = (facts >> 48) & 0xFF, equality = (efacts >> 16) & 0xFF, completion = efacts & 0xFF;
	long long ptp = le64(rec + 40), eptp = le64(rec + START_BYTES);
	if (op >= PyTuple_GET_SIZE(c->ops) || gi >= PyList_GET_SIZE(c->groups) || gi >= PyList_GET_SIZE(c->ranks) ||
	    !PyBytes_CheckExact(PyList_GET_ITEM(c->groups, gi)))
		return 0;
	if (source > 2 || quality >= PyTuple_GET_SIZE(c->qualities) || equality > 2 ||
	    completion >= PyTuple_GET_SIZE(c->completions))
		return 0;
	/* one TAI-UTC offset for both readings, a second clear of the last leap (a float compares there) */
	return !(ptp < c->boundary || eptp < c->boundary || ptp - c->offset == 0 || eptp - c->offset == 0);
}

/* HostDomain.label: the index of the tail a record's span carries (both readings' one clock epoch), -1 when its
 * readings may lie across a change (the span says the clock may have stepped: Python's). */
static Py_ssize_t epoch_index(const Config *c, const char *rec)
{
	if (c->n_windows == 0)
		return 0;
	Py_ssize_t epoch = epoch_of(c, le64(rec + 40));
	return epoch >= 0 && epoch_of(c, le64(rec + START_BYTES)) == epoch ? epoch : -1;
}

/* parent_of(context), asked once per context: its answer, borrowed from the cache (False: not cached). */
static PyObject *parent_answer(const Config *c, Parents *p, PyObject *context)
{
	for (int i = 0; i < p->n; i++)
		if (p->context[i] == context)
			return p->answer[i];
	PyObject *answer = PyObject_CallOneArg(c->parent_of, context);
	if (answer == NULL)
		return NULL;
	if (p->n < CACHE) {
		p->context[p->n] = Py_NewRef(context);
		p->answer[p->n] = answer;
		p->n++;
		return answer;
	}
	/* more contexts than the cache holds (a step's ops share one): the records of the rest are Python's */
	Py_DECREF(answer);
	return Py_False;
}

static int how_of(PyObject *answer, const Config *c)
{
	if (answer == Py_None)
		return UNSAMPLED;
	if (answer == Py_True)
		return c->roots ? ROOT : LEFT;
	if (PyTuple_CheckExact(answer) && PyTuple_GET_SIZE(answer) == 2 && PyBytes_CheckExact(PyTuple_GET_ITEM(answer, 0)) &&
	    PyBytes_GET_SIZE(PyTuple_GET_ITEM(answer, 0)) == 32 && PyBytes_CheckExact(PyTuple_GET_ITEM(answer, 1)))
		return WITH_PARENT;
	return LEFT;
}

/* The stamps text (stamptext.encode) of a start and an end, into o: s<lts>,<src>[,<dt>] e<dlts>[...]. */
static void put_stamps(Out *o, const Config *c, const char *rec)
{
	long long facts = le64(rec + 8), efacts = le64(rec + START_BYTES + 24);
	long long unc = le64(rec + 48), lts = le64(rec + 56);
	long long eunc = le64(rec + START_BYTES + 8), elts = le64(rec + START_BYTES + 16);
	long long source = (facts >> 40) & 0xFF, quality = (facts >> 48) & 0xFF, equality = (efacts >> 16) & 0xFF;
	/* ptp - utc - base with utc = ptp - offset, for the start and the end alike */
	long long dt = c->offset - c->base;
	*o->at++ = '"';
	*o->at++ = 's';
	put_i64(o, lts);
	*o->at++ = ',';
	*o->at++ = (char)('0' + source);
	if (dt != 0) {
		*o->at++ = ',';
		put_i64(o, dt);
	}
	put_s(o, " e");
	put_i64(o, elts - lts);
	if (eunc != unc || equality != quality) {
		*o->at++ = ',';
		put_i64(o, dt);
		*o->at++ = ',';
		put_i64(o, eunc);
		*o->at++ = ',';
		*o->at++ = (char)('0' + equality);
	} else if (dt != 0) {
		*o->at++ = ',';
		put_i64(o, dt);
	}
	*o->at++ = '"';
}

/* A point-to-point record's tag: the signed high half of its root word (recorder.py p2p_word). */
static long long tag_of(long long root)
{
	return (int32_t)(uint32_t)((uint64_t)root >> 32);
}

/* A bool attribute: key fragment, then {"boolValue":true}} (only true is written). */
static void put_true_value(Out *o, PyObject *key)
{
	*o->at++ = ',';
	put_bytes(o, key);
	put_s(o, "{\"boolValue\":true}}");
}

/* An op's own attributes after its op (opspans.op_attributes): a collective's root and seq, or a point-to-point
 * op's tag, peer, ends and p2p seq (the root word holds tag << 32 | peer: recorder.py p2p_word); its completion. */
static void put_own(Out *o, const Config *c, const char *rec, long shape)
{
	long long facts = le64(rec + 8), seq = le64(rec + 16), nbytes = le64(rec + 24), root = le64(rec + 32);
	long long completion = le64(rec + START_BYTES + 24) & 0xFF;
	PyObject *keys = c->keys;
	if (nbytes >= 0)
		put_int_value(o, PyTuple_GET_ITEM(keys, KEY_BYTES), nbytes);
	if (shape == COLLECTIVE) {
		if (root >= 0)
			put_int_value(o, PyTuple_GET_ITEM(keys, KEY_ROOT), root);
		put_int_value(o, PyTuple_GET_ITEM(keys, KEY_SEQ), seq);
	} else {
		long long peer = root & 0xFFFFFFFFLL, tag = tag_of(root);
		long long rank = PyLong_AsLongLong(PyList_GET_ITEM(c->ranks, (facts >> 16) & 0xFFFFFF));
		put_int_value(o, PyTuple_GET_ITEM(keys, KEY_TAG), tag);
		put_int_value(o, PyTuple_GET_ITEM(keys, KEY_PEER), peer);
		put_int_value(o, PyTuple_GET_ITEM(keys, shape == SEND ? KEY_SRC : KEY_DST), rank);
		put_int_value(o, PyTuple_GET_ITEM(keys, shape == SEND ? KEY_DST : KEY_SRC), peer);
		put_int_value(o, PyTuple_GET_ITEM(keys, KEY_P2P_SEQ), seq);
	}
	if (shape == RECV_ASYNC && (facts & AMBIGUOUS_FLAG))
		put_true_value(o, PyTuple_GET_ITEM(keys, KEY_AMBIGUOUS));
	put_string_value(o, PyTuple_GET_ITEM(keys, KEY_COMPLETION), PyTuple_GET_ITEM(c->completions, completion), 1);
	if (shape == RECV && (facts & AMBIGUOUS_FLAG))
		put_true_value(o, PyTuple_GET_ITEM(keys, KEY_AMBIGUOUS));
}

/* A batch_isend_irecv op's own attributes after its op, in p2p.py's order (opspans._batched_attributes). */
static void put_batched(Out *o, const Config *c, const char *rec, long shape)
{
	long long facts = le64(rec + 8), seq = le64(rec + 16), nbytes = le64(rec + 24), root = le64(rec + 32);
	long long completion = le64(rec + START_BYTES + 24) & 0xFF;
	long long peer = root & 0xFFFFFFFFLL, tag = tag_of(root);
	long long rank = PyLong_AsLongLong(PyList_GET_ITEM(c->ranks, (facts >> 16) & 0xFFFFFF));
	PyObject *keys = c->keys;
	put_true_value(o, PyTuple_GET_ITEM(keys, KEY_BATCHED));
	put_int_value(o, PyTuple_GET_ITEM(keys, KEY_PEER), peer);
	put_int_value(o, PyTuple_GET_ITEM(keys, KEY_SRC), shape == SEND ? rank : peer);
	put_int_value(o, PyTuple_GET_ITEM(keys, KEY_DST), shape == SEND ? peer : rank);
	put_int_value(o, PyTuple_GET_ITEM(keys, KEY_TAG), tag);
	put_int_value(o, PyTuple_GET_ITEM(keys, KEY_P2P_SEQ), seq);
	if (nbytes >= 0)
		put_int_value(o, PyTuple_GET_ITEM(keys, KEY_BYTES), nbytes);
	if (facts & AMBIGUOUS_FLAG)
		put_true_value(o, PyTuple_GET_ITEM(keys, KEY_AMBIGUOUS));
	put_string_value(o, PyTuple_GET_ITEM(keys, KEY_COMPLETION), PyTuple_GET_ITEM(c->completions, completion), 1);
}

/* One span's JSON (otlp_json _Span of make_span's ReadableSpan), into o. */
static void put_span(Out *o, const Config *c, const Candidate *k)
{
	const char *rec = k->rec;
	long long number = le64(rec), facts = le64(rec + 8);
	long long ptp = le64(rec + 40), unc = le64(rec + 48), eptp = le64(rec + START_BYTES);
	long long quality = (facts >> 48) & 0xFF;
	PyObject *op = PyTuple_GET_ITEM(c->ops, facts & 0xFFFF), *keys = c->keys;
	uint64_t span_id = span_id_of(c, number);

	put_s(o, "{\"traceId\":\"");
	if (k->how == WITH_PARENT) {
		put_bytes(o, PyTuple_GET_ITEM(k->parent, 0));
	} else {
		put_hex64(o, c->nonce_high); /* a root op's trace id: 64 random bits of the process above its span id */
		put_hex64(o, span_id);
	}
	put_s(o, "\",\"spanId\":\"");
	put_hex64(o, span_id);
	*o->at++ = '"';
	if (k->how == WITH_PARENT)
		put_bytes(o, PyTuple_GET_ITEM(k->parent, 1)); /* traceState, parentSpanId, flags */
	else
		put_s(o, ",\"flags\":256");
	put_s(o, ",\"name\":");
	put_bytes(o, PyTuple_GET_ITEM(op, 0));
	put_s(o, ",\"kind\":1,\"startTimeUnixNano\":\"");
	put_i64(o, ptp - c->offset);
	put_s(o, "\",\"endTimeUnixNano\":\"");
	put_i64(o, eptp - c->offset);
	put_s(o, "\",\"attributes\":[");
	/* the group's attributes, then the op's (opspans.op_attributes), then the stamps' (processor._attributes) */
	PyObject *group = PyList_GET_ITEM(c->groups, (facts >> 16) & 0xFFFFFF);
	put_bytes(o, group);
	put_string_value(o, PyTuple_GET_ITEM(keys, KEY_OP), PyTuple_GET_ITEM(op, 1), PyBytes_GET_SIZE(group) > 0);
	long shape = PyLong_AsLong(PyTuple_GET_ITEM(op, 2)); /* (config_of checked it) */
	if (shape != COLLECTIVE && (facts & BATCHED_FLAG)) {
		put_batched(o, c, rec, shape);
	} else {
		put_own(o, c, rec, shape);
	}
	*o->at++ = ',';
	put_bytes(o, PyTuple_GET_ITEM(keys, KEY_STAMPS));
	put_s(o, "{\"stringValue\":");
	put_stamps(o, c, rec);
	put_s(o, "}}");
	put_string_value(o, PyTuple_GET_ITEM(keys, KEY_QUALITY), PyTuple_GET_ITEM(c->qualities, quality), 1);
	put_int_value(o, PyTuple_GET_ITEM(keys, KEY_UNCERTAINTY), unc);
	PyObject *tail = PyTuple_GET_ITEM(c->tails, k->epoch);
	if (PyBytes_GET_SIZE(tail) > 0) {
		*o->at++ = ',';
		put_bytes(o, tail);
	}
	put_s(o, "],\"status\":{}}");
}

/* The most octets put_span writes for this config (every variable part at its longest). */
static Py_ssize_t span_max(const Config *c, const Candidate *k)
{
	Py_ssize_t n = c->fixed_max + PyBytes_GET_SIZE(PyTuple_GET_ITEM(c->tails, k->epoch));
	long long facts = le64(k->rec + 8);
	PyObject *op = PyTuple_GET_ITEM(c->ops, facts & 0xFFFF);
	n += PyBytes_GET_SIZE(PyTuple_GET_ITEM(op, 0)) + PyBytes_GET_SIZE(PyTuple_GET_ITEM(op, 1));
	n += PyBytes_GET_SIZE(PyList_GET_ITEM(c->groups, (facts >> 16) & 0xFFFFFF));
	if (k->how == WITH_PARENT)
		n += PyBytes_GET_SIZE(PyTuple_GET_ITEM(k->parent, 1));
	return n;
}

static const char BAD_ARGS[] = "encode_ended: arguments not as torch/opspans.py builds them";

static int config_of(Config *c, PyObject *const *args)
{
	memset(c, 0, sizeof *c);
	c->nonce = PyLong_AsUnsignedLongLongMask(args[4]);
	c->nonce_high = PyLong_AsUnsignedLongLongMask(args[5]);
	c->groups = args[6];
	c->ranks = args[7];
	c->ops = args[8];
	c->parent_of = args[9];
	c->roots = PyObject_IsTrue(args[10]);
	c->epochs = args[12];
	c->keys = args[13];
	c->completions = args[14];
	c->qualities = args[15];
	if (PyErr_Occurred() || c->roots < 0)
		return -1;
	if (!PyList_CheckExact(c->groups) || !PyList_CheckExact(c->ranks) || !PyTuple_CheckExact(c->ops) ||
	    !PyTuple_CheckExact(c->keys) ||
	    PyTuple_GET_SIZE(c->keys) != N_KEYS || !PyTuple_CheckExact(c->completions) ||
	    !PyTuple_CheckExact(c->qualities) || !PyCallable_Check(c->parent_of) || !PyCallable_Check(c->epochs) ||
	    !PyArg_ParseTuple(args[11], "LLL", &c->boundary, &c->offset, &c->base))
		goto bad;
	for (Py_ssize_t i = 0; i < PyList_GET_SIZE(c->ranks); i++) {
		PyObject *rank = PyList_GET_ITEM(c->ranks, i);
		if (!PyLong_CheckExact(rank))
			goto bad;
		long long r = PyLong_AsLongLong(rank);
		if (r < 0 || r > INT32_MAX) /* a global rank is an int32 (an overflow is -1 here too) */
			goto bad;
	}
	for (Py_ssize_t i = 0; i < N_KEYS; i++)
		if (!PyBytes_CheckExact(PyTuple_GET_ITEM(c->keys, i)))
			goto bad;
	for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(c->ops); i++) {
		PyObject *op = PyTuple_GET_ITEM(c->ops, i);
		if (!PyTuple_CheckExact(op) || PyTuple_GET_SIZE(op) != 3 || !PyBytes_CheckExact(PyTuple_GET_ITEM(op, 0)) ||
		    !PyBytes_CheckExact(PyTuple_GET_ITEM(op, 1)) || !PyLong_CheckExact(PyTuple_GET_ITEM(op, 2)))
			goto bad;
		long shape = PyLong_AsLong(PyTuple_GET_ITEM(op, 2));
		if (shape != COLLECTIVE && shape != SEND && shape != RECV && shape != RECV_ASYNC)
			goto bad;
	}
	/* the fixed text and numbers (1536 covers them, the p2p ones too), every key, the longest completion and
	 * quality */
	c->fixed_max = 1536;
	for (Py_ssize_t i = 0; i < N_KEYS; i++)
		c->fixed_max += PyBytes_GET_SIZE(PyTuple_GET_ITEM(c->keys, i));
	for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(c->completions); i++) {
		if (!PyBytes_CheckExact(PyTuple_GET_ITEM(c->completions, i)))
			goto bad;
		c->fixed_max += PyBytes_GET_SIZE(PyTuple_GET_ITEM(c->completions, i));
	}
	for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(c->qualities); i++) {
		if (!PyBytes_CheckExact(PyTuple_GET_ITEM(c->qualities, i)))
			goto bad;
		c->fixed_max += PyBytes_GET_SIZE(PyTuple_GET_ITEM(c->qualities, i));
	}
	return 0;
bad:
	if (!PyErr_Occurred())
		PyErr_SetString(PyExc_TypeError, BAD_ARGS);
	return -1;
}

/* Asks epochs() -- a fresh clock-domain check, so after every candidate's readings were taken (they had ended
 * when the scan saw them) -- for each epoch's window and tail. 1: asked, 0: epochs no longer told apart (every
 * candidate is Python's), -1: an error. */
static int clock_of(Config *c)
{
	c->clock = PyObject_CallNoArgs(c->epochs);
	if (c->clock == NULL)
		return -1;
	if (c->clock == Py_None)
		return 0;
	PyObject *windows, *tails;
	if (!PyTuple_CheckExact(c->clock) || PyTuple_GET_SIZE(c->clock) != 2)
		goto bad;
	windows = PyTuple_GET_ITEM(c->clock, 0);
	tails = c->tails = PyTuple_GET_ITEM(c->clock, 1);
	if (!PyTuple_CheckExact(tails))
		goto bad;
	for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tails); i++)
		if (!PyBytes_CheckExact(PyTuple_GET_ITEM(tails, i)))
			goto bad;
	if (windows == Py_None) /* no host clock domain: one tail */
		return PyTuple_GET_SIZE(tails) == 1 ? 1 : (PyErr_SetString(PyExc_TypeError, BAD_ARGS), -1);
	if (!PyTuple_CheckExact(windows) || PyTuple_GET_SIZE(windows) > MAX_WINDOWS ||
	    PyTuple_GET_SIZE(windows) != PyTuple_GET_SIZE(tails) || PyTuple_GET_SIZE(windows) == 0)
		goto bad;
	c->n_windows = PyTuple_GET_SIZE(windows);
	for (Py_ssize_t i = 0; i < c->n_windows; i++) {
		Window *w = &c->windows[i];
		if (!PyArg_ParseTuple(PyTuple_GET_ITEM(windows, i), "LLLL", &w->mid, &w->half, &w->since, &w->limit))
			goto bad;
	}
	return 1;
bad:
	if (!PyErr_Occurred())
		PyErr_SetString(PyExc_TypeError, BAD_ARGS);
	return -1;
}

static PyObject *s_acquire_name, *s_release_name;

/* Phase 2, under the lock: each candidate still ENDED with its number and context is copied and emptied. */
static void take(PyObject *states, PyObject *buffer, PyObject *parents, Candidate *k, Py_ssize_t n,
		 long long *first_waiting)
{
	char *st = PyByteArray_AS_STRING(states), *buf = PyByteArray_AS_STRING(buffer);
	for (Py_ssize_t i = 0; i < n; i++) {
		Candidate *x = &k[i];
		if (x->how == LEFT)
			continue;
		if ((unsigned char)st[x->slot] != ENDED || le64(buf + x->slot * RECORD_BYTES) != x->number ||
		    PyList_GET_ITEM(parents, x->slot) != x->context) {
			/* changed since the scan (a dump took it, an op began in it): as take_ended's failed _take */
			if (*first_waiting < 0 || x->number < *first_waiting)
				*first_waiting = x->number;
			x->how = LEFT;
			x->number = -1;
			continue;
		}
		memcpy(x->rec, buf + x->slot * RECORD_BYTES, RECORD_BYTES);
		st[x->slot] = EMPTY;
		/* the list's reference goes; ours (held) keeps the context alive: no Python code runs under the lock */
		PyList_SET_ITEM(parents, x->slot, Py_NewRef(Py_None));
		Py_DECREF(x->context);
	}
}

PyObject *tt_encode_ended(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
	Config c;
	Parents p = {.n = 0};
	Candidate *k = NULL;
	PyObject *items = NULL, *left = NULL, *result = NULL;
	long long low, last, mask, first_waiting = -1;
	Py_ssize_t n = 0, lost = 0;
	if (nargs != 16) {
		PyErr_SetString(PyExc_TypeError, "encode_ended takes 16 arguments");
		return NULL;
	}
	if (s_acquire_name == NULL && ((s_acquire_name = PyUnicode_InternFromString("acquire")) == NULL ||
				       (s_release_name = PyUnicode_InternFromString("release")) == NULL))
		return NULL;
	PyObject *ring = args[0];
	if (!PyTuple_CheckExact(ring) || PyTuple_GET_SIZE(ring) != 6 || !PyByteArray_CheckExact(PyTuple_GET_ITEM(ring, 0)) ||
	    !PyByteArray_CheckExact(PyTuple_GET_ITEM(ring, 1)) || !PyList_CheckExact(PyTuple_GET_ITEM(ring, 5))) {
		PyErr_SetString(PyExc_TypeError, "encode_ended: the recorder's ring is not what it reads");
		return NULL;
	}
	PyObject *states = PyTuple_GET_ITEM(ring, 0), *buffer = PyTuple_GET_ITEM(ring, 1);
	PyObject *lock = PyTuple_GET_ITEM(ring, 2), *parents = PyTuple_GET_ITEM(ring, 5);
	low = PyLong_AsLongLong(args[1]);
	last = PyLong_AsLongLong(args[2]);
	mask = PyLong_AsLongLong(PyTuple_GET_ITEM(ring, 3));
	if (PyErr_Occurred() || config_of(&c, args) < 0)
		return NULL;
	Py_ssize_t slots = PyByteArray_GET_SIZE(states);
	if (mask + 1 != slots || PyByteArray_GET_SIZE(buffer) != slots * RECORD_BYTES ||
	    PyList_GET_SIZE(parents) != slots || low < 0 || last - low > slots) {
		PyErr_SetString(PyExc_ValueError, "encode_ended: a ring or a range not the recorder's");
		return NULL;
	}
	/* Phase 1, the GIL held and no lock: the ENDED records (counted first: the range may be the whole ring), and
	 * how each span is written. The lists come first: making one may run the GC, and Python code with it, in
	 * which more records may end (no Python code runs from the count to the scan's end). */
	items = PyList_New(0);
	left = PyList_New(0);
	if (items == NULL || left == NULL)
		goto out;
	const char *st = PyByteArray_AS_STRING(states), *buf = PyByteArray_AS_STRING(buffer);
	Py_ssize_t ended = 0;
	for (long long number = low; number < last; number++)
		ended += (unsigned char)st[number & mask] == ENDED;
	k = PyMem_Calloc(ended > 0 ? (size_t)ended : 1, sizeof *k);
	if (k == NULL) {
		PyErr_NoMemory();
		goto out;
	}
	for (long long number = low; number < last; number++) {
		Py_ssize_t slot = (Py_ssize_t)(number & mask);
		int s = (unsigned char)st[slot];
		if (s == EMPTY)
			continue;
		long long held = le64(buf + slot * RECORD_BYTES);
		if (held > number)
			continue; /* overwritten by a later op: counted when it was */
		if (held < number || s != ENDED) {
			if (first_waiting < 0)
				first_waiting = number;
			continue;
		}
		if (n == ended) { /* (cannot happen: nothing ran since the count) the rest waits for the next take */
			if (first_waiting < 0)
				first_waiting = number;
			break;
		}
		Candidate *x = &k[n++];
		x->number = number;
		x->slot = slot;
		x->how = encodable(&c, buf + slot * RECORD_BYTES) ? ROOT : LEFT;
		if (x->how != LEFT) {
			/* held now, before parent_of runs Python: another thread may replace the slot's context meanwhile */
			x->context = Py_NewRef(PyList_GET_ITEM(parents, slot));
			x->held = 1;
		}
	}
	/* The clock is checked after the scan, as make_spans checks after its take: a reading taken after the check,
	 * across a backward step, could fit the old epoch's window. epochs() and parent_of run Python (other threads
	 * may run): the slots are checked again under the lock. */
	int told = n > 0 ? clock_of(&c) : 0;
	if (told < 0)
		goto out;
	buf = PyByteArray_AS_STRING(buffer); /* (epochs() ran Python: the ring's storage is read again, not assumed) */
	for (Py_ssize_t i = 0; i < n; i++) {
		Candidate *x = &k[i];
		if (x->how == LEFT)
			continue;
		x->epoch = told ? epoch_index(&c, buf + x->slot * RECORD_BYTES) : -1;
		if (x->epoch < 0) {
			x->how = LEFT;
			continue;
		}
		if (x->context == Py_None) {
			x->how = c.roots ? ROOT : LEFT;
		} else {
			PyObject *answer = parent_answer(&c, &p, x->context);
			if (answer == NULL)
				goto out;
			x->how = how_of(answer, &c);
			x->parent = answer;
		}
	}
	if (call_lock(lock, s_acquire_name) < 0)
		goto out; /* (an interrupt: nothing taken) */
	take(states, buffer, parents, k, n, &first_waiting);
	if (call_lock(lock, s_release_name) < 0)
		goto out;
	/* Phase 3, no lock: the spans of the records taken (they are out of the ring: one that cannot be written is
	 * counted lost, the others are returned all the same) */
	for (Py_ssize_t i = 0; i < n; i++) {
		Candidate *x = &k[i];
		if (x->how == LEFT) {
			if (x->number >= 0) {
				PyObject *num = PyLong_FromLongLong(x->number);
				if (num == NULL || PyList_Append(left, num) < 0) { /* (no memory: still ENDED, the next take's) */
					Py_XDECREF(num);
					PyErr_Clear();
					if (first_waiting < 0 || x->number < first_waiting)
						first_waiting = x->number;
					continue;
				}
				Py_DECREF(num);
			}
			continue;
		}
		if (x->how == UNSAMPLED)
			continue;
		PyObject *bytes = PyBytes_FromStringAndSize(NULL, span_max(&c, x)), *item = NULL;
		if (bytes != NULL) {
			Out o = {PyBytes_AS_STRING(bytes), PyBytes_AS_STRING(bytes) + PyBytes_GET_SIZE(bytes)};
			put_span(&o, &c, x);
			if (_PyBytes_Resize(&bytes, o.at - PyBytes_AS_STRING(bytes)) == 0) {
				item = PyTuple_Pack(2, args[3], bytes);
				Py_DECREF(bytes);
			}
		}
		if (item == NULL || PyList_Append(items, item) < 0) { /* (no memory) */
			PyErr_Clear();
			lost++;
		}
		Py_XDECREF(item);
	}
	result = Py_BuildValue("(OOLn)", items, left, first_waiting, lost);
out:
	for (Py_ssize_t i = 0; k != NULL && i < n; i++)
		if (k[i].held)
			Py_DECREF(k[i].context);
	for (int i = 0; i < p.n; i++) {
		Py_DECREF(p.context[i]);
		Py_DECREF(p.answer[i]);
	}
	PyMem_Free(k);
	Py_XDECREF(c.clock);
	Py_XDECREF(items);
	Py_XDECREF(left);
	return result;
}
