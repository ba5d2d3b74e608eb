/*
 * tt_replay.h - whether a run's happens-before structure replays to its end (tt_replay.c).
 */
#ifndef TT_REPLAY_H
#define TT_REPLAY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* replays(pred, succ, orders, claim_in) -> bool: Graph.cycles' replay of the structure (pred and succ int64
 * arrays; each process's (Lamport values, nodes) int64 arrays; claim node -> its required starts) reaches
 * every node of every order; False also where it declines a structure Graph never builds (Graph.replay answers). */
PyObject *tt_replays(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
