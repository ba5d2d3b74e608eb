/*
 * tt_replay.c - whether a run's happens-before structure replays to its end, in C
 * (tempotrace_sdk._columns.replays; analysis/derived_graph.py Graph.cycles, spec/analysis.md §2.8).
 *
 * Why: every run of a torch trace is checked for cycles before its derived edges are decided, and an honest
 * one always replays to its end. The replay in Python (each process's nodes sorted by Lamport value, then
 * advanced while the cross link into the next node is done) took about 1 us a node: 3.5% of the columnar
 * engine on the torch demo's export. This is the same replay over the same arrays. It answers only whether
 * everything replays; where something does not (a cycle, or what lies after one), Graph.cycles replays again
 * in Python and computes the strongly connected components from what it reached.
 *
 * The done set a replay reaches does not depend on the order the processes are advanced in (a node is done
 * once its process reached it and its cross link's source is done: a least fixed point), so the answer is
 * Python's whatever the order of the work. Lamport values and nodes are read through the buffer protocol as
 * int64 (array("q")); a structure Graph never builds (a node outside it, a node in two orders) is declined
 * (False): Graph.replay answers it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

#include "tt_replay.h"
#include "tt_stampfields.h"

typedef struct {
	int64_t lts, node;
} Placed;

static int by_lts(const void *a, const void *b)
{
	int64_t x = ((const Placed *)a)->lts, y = ((const Placed *)b)->lts;
	return (x > y) - (x < y);
}

/* An int64 buffer of `obj` (array("q")), one dimension: 0 done, -1 an error set. */
static int int64_view(PyObject *obj, Py_buffer *view)
{
	return tt_typed_view(obj, view, 8, 1, 0, PyExc_TypeError, "replays: int64 arrays (array('q'))");
}

typedef struct {
	Py_ssize_t n;	     /* nodes */
	const int64_t *pred; /* node -> the source of its cross link, or -1 */
	const int64_t *succ; /* node -> the target of its cross link, or -1 */
	int64_t *left;	     /* claim node -> required starts not yet done; -1: not a claim */
	uint8_t *done;
	int64_t *order_nodes; /* each order's nodes, one order after another */
	Py_ssize_t *order_start; /* order k: order_nodes[order_start[k] .. order_start[k + 1]) */
	Py_ssize_t orders;
	Py_ssize_t *at;	    /* how far each order has been replayed */
	Py_ssize_t *wait_head; /* node -> the first order stopped until it is done, or -1 */
	Py_ssize_t *wait_next; /* order -> the next order stopped on the same node, or -1 */
	Py_ssize_t *work;      /* a stack of orders to advance (each at most once on it) */
	Py_ssize_t n_work;
} Replay;

static void wake(Replay *r, int64_t node)
{
	for (Py_ssize_t k = r->wait_head[node]; k >= 0;) {
		Py_ssize_t next = r->wait_next[k];
		r->work[r->n_work++] = k;
		k = next;
	}
	r->wait_head[node] = -1;
}

/* Graph.cycles' replay loop: 1 when every order reached its end. */
static int replay(Replay *r)
{
	for (Py_ssize_t k = r->orders - 1; k >= 0; k--)
		r->work[r->n_work++] = k; /* (the Python pops from the end too; the answer does not depend on it) */
	while (r->n_work) {
		Py_ssize_t k = r->work[--r->n_work];
		Py_ssize_t i = r->at[k], m = r->order_start[k + 1] - r->order_start[k];
		const int64_t *order = r->order_nodes + r->order_start[k];
		while (i < m) {
			int64_t node = order[i], p = r->pred[node];
			if (p >= 0 && !r->done[p]) {
				r->wait_next[k] = r->wait_head[p];
				r->wait_head[p] = k;
				break;
			}
			r->done[node] = 1;
			i++;
			wake(r, node);
			int64_t s = r->succ[node];
			if (s >= 0 && r->left[s] >= 0) {
				if (--r->left[s] == 0) {
					r->done[s] = 1;
					wake(r, s);
				}
			}
		}
		r->at[k] = i;
	}
	for (Py_ssize_t k = 0; k < r->orders; k++)
		if (r->at[k] != r->order_start[k + 1] - r->order_start[k])
			return 0;
	return 1;
}

PyObject *tt_replays(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
	if (nargs != 4 || !PyList_CheckExact(args[2]) || !PyDict_CheckExact(args[3])) {
		PyErr_SetString(PyExc_TypeError, "replays(pred, succ, orders: list[(lts, nodes)], claim_in: dict)");
		return NULL;
	}
	PyObject *claim_in = args[3], *result = NULL;
	/* (a tuple of the orders: a buffer's __buffer__ may run code that changes the list) */
	PyObject *orders = PyList_AsTuple(args[2]);
	if (orders == NULL)
		return NULL;
	Py_buffer pv = {0}, sv = {0};
	Py_buffer *views = NULL;
	Py_ssize_t n_views = 0, n_orders = PyTuple_GET_SIZE(orders);
	Replay r = {0};
	Placed *placed_sort = NULL;
	uint8_t *placed = NULL;
	if (int64_view(args[0], &pv) < 0) {
		Py_DECREF(orders);
		return NULL;
	}
	if (int64_view(args[1], &sv) < 0)
		goto done;
	r.n = pv.len / 8;
	if (sv.len / 8 != r.n)
		goto declined; /* (no structure Graph builds: Graph.replay answers) */
	r.pred = pv.buf;
	r.succ = sv.buf;
	for (Py_ssize_t v = 0; v < r.n; v++)
		if (r.pred[v] < -1 || r.pred[v] >= r.n || r.succ[v] < -1 || r.succ[v] >= r.n)
			goto declined; /* (no structure Graph builds: Graph.replay answers) */
	size_t n = (size_t)r.n + 1;
	views = PyMem_Calloc((size_t)n_orders * 2 + 1, sizeof(Py_buffer));
	r.left = PyMem_Malloc(n * sizeof(int64_t));
	r.done = PyMem_Calloc(n, 1);
	placed = PyMem_Calloc(n, 1);
	r.wait_head = PyMem_Malloc(n * sizeof(Py_ssize_t));
	/* orders: one a process at most, and one a node left over: at most n + processes */
	size_t max_orders = n + (size_t)n_orders;
	r.order_start = PyMem_Malloc((max_orders + 1) * sizeof(Py_ssize_t));
	r.order_nodes = PyMem_Malloc((n + 1) * sizeof(int64_t));
	r.at = PyMem_Calloc(max_orders, sizeof(Py_ssize_t));
	r.wait_next = PyMem_Malloc(max_orders * sizeof(Py_ssize_t));
	r.work = PyMem_Malloc(max_orders * sizeof(Py_ssize_t));
	placed_sort = PyMem_Malloc(n * sizeof(Placed));
	if (!views || !r.left || !r.done || !placed || !r.wait_head || !r.order_start || !r.order_nodes || !r.at ||
	    !r.wait_next || !r.work || !placed_sort) {
		PyErr_NoMemory();
		goto done;
	}
	for (Py_ssize_t v = 0; v < r.n; v++) {
		r.left[v] = -1;
		r.wait_head[v] = -1;
	}
	/* claim nodes: their required starts; one with none is done from the start */
	PyObject *key, *value;
	Py_ssize_t pos = 0;
	while (PyDict_Next(claim_in, &pos, &key, &value)) {
		Py_ssize_t v = PyLong_AsSsize_t(key), starts = PyLong_AsSsize_t(value);
		if ((v == -1 || starts == -1) && PyErr_Occurred())
			goto done;
		if (v < 0 || v >= r.n || starts < 0)
			goto declined; /* (no structure Graph builds: Graph.replay answers) */
		r.left[v] = starts;
		r.done[v] = starts == 0;
		placed[v] = 1;
	}
	/* each process's nodes in Lamport order (Graph._program_orders): none where a value repeats */
	Py_ssize_t used = 0;
	for (Py_ssize_t k = 0; k < n_orders; k++) {
		PyObject *item = PyTuple_GET_ITEM(orders, k);
		if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2) {
			PyErr_SetString(PyExc_TypeError, "replays: each order a (lts, nodes) tuple");
			goto done;
		}
		Py_buffer *lv = &views[n_views], *nv = &views[n_views + 1];
		if (int64_view(PyTuple_GET_ITEM(item, 0), lv) < 0)
			goto done;
		n_views++;
		if (int64_view(PyTuple_GET_ITEM(item, 1), nv) < 0)
			goto done;
		n_views++;
		Py_ssize_t m = lv->len / 8;
		const int64_t *lts = lv->buf, *nodes = nv->buf;
		if (nv->len / 8 != m || used + m > r.n)
			goto declined; /* (no structure Graph builds: Graph.replay answers) */
		for (Py_ssize_t i = 0; i < m; i++) {
			if (nodes[i] < 0 || nodes[i] >= r.n)
				goto declined; /* (no structure Graph builds: Graph.replay answers) */
			placed_sort[i].lts = lts[i];
			placed_sort[i].node = nodes[i];
		}
		qsort(placed_sort, (size_t)m, sizeof(Placed), by_lts);
		int repeated = 0;
		for (Py_ssize_t i = 1; i < m && !repeated; i++)
			repeated = placed_sort[i].lts == placed_sort[i - 1].lts;
		if (repeated)
			continue;
		r.order_start[r.orders++] = used;
		for (Py_ssize_t i = 0; i < m; i++) {
			r.order_nodes[used++] = placed_sort[i].node;
			placed[placed_sort[i].node] = 1;
		}
	}
	for (Py_ssize_t v = 0; v < r.n; v++) /* every other node an order of its own */
		if (!placed[v]) {
			if (used >= r.n)
				goto declined; /* (no structure Graph builds: Graph.replay answers) */
			r.order_start[r.orders++] = used;
			r.order_nodes[used++] = v;
		}
	r.order_start[r.orders] = used;
	result = PyBool_FromLong(replay(&r));
	goto done;
declined:
	result = Py_NewRef(Py_False);
done:
	for (Py_ssize_t k = 0; k < n_views; k++)
		PyBuffer_Release(&views[k]);
	PyMem_Free(views);
	PyMem_Free(r.left);
	PyMem_Free(r.done);
	PyMem_Free(placed);
	PyMem_Free(r.wait_head);
	PyMem_Free(r.order_start);
	PyMem_Free(r.order_nodes);
	PyMem_Free(r.at);
	PyMem_Free(r.wait_next);
	PyMem_Free(r.work);
	PyMem_Free(placed_sort);
	if (sv.obj != NULL)
		PyBuffer_Release(&sv);
	PyBuffer_Release(&pv);
	Py_DECREF(orders);
	return result;
}
