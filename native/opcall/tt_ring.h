/*
 * tt_ring.h - what both halves of the _opcall extension know of the recorder's ring
 * (tempotrace_sdk/torch/recorder.py): the slot states, the record's size, reading its words.
 */
#ifndef TT_RING_H
#define TT_RING_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* A slot's state octet, as tempotrace_sdk/torch/recorder.py names them. */
enum { EMPTY = 0, OPEN = 1, ENDED = 2, WRITING = 3, ENDING = 4, DUMPED = 5 };
/* A record: 64 octets of start, 32 of end (recorder.py RECORD_BYTES). */
enum { START_BYTES = 64, RECORD_BYTES = 96 };

/* A little-endian int64 word of a record. */
static inline int64_t le64(const char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | (unsigned char)p[i];
	return (int64_t)v;
}

/* The recorder's _slot_lock where the extension is built: a lock both halves take with no Python call (a
 * threading.Lock's acquire and release are method calls, four an op). tt_opcall.c defines the type. */
typedef struct {
	PyObject_HEAD
	PyThread_type_lock lock;
	char held; /* (as a threading.Lock's: releasing a free lock is an error, not a second permit) */
} SlotLock;

extern PyTypeObject tt_SlotLockType;

/* Takes a SlotLock: at once when it is free, else waiting with the GIL released (its holders never wait for the
 * GIL while they hold it for long: a C section runs no Python, a Python one a few lines). */
static inline void slot_lock_take(SlotLock *l)
{
	if (!PyThread_acquire_lock(l->lock, NOWAIT_LOCK)) {
		Py_BEGIN_ALLOW_THREADS
		PyThread_acquire_lock(l->lock, WAIT_LOCK);
		Py_END_ALLOW_THREADS
	}
	l->held = 1;
}

static inline void slot_lock_give(SlotLock *l)
{
	l->held = 0;
	PyThread_release_lock(l->lock);
}

/* lock.acquire() or lock.release() (method: the interned name): a SlotLock's directly, another lock's (a
 * threading.Lock: an acquire waits with the GIL released) by its method. */
static inline int call_lock(PyObject *lock, PyObject *method)
{
	if (Py_IS_TYPE(lock, &tt_SlotLockType)) {
		if (PyUnicode_READ_CHAR(method, 0) == 'a')
			slot_lock_take((SlotLock *)lock);
		else
			slot_lock_give((SlotLock *)lock);
		return 0;
	}
	PyObject *r = PyObject_CallMethodNoArgs(lock, method);
	if (r == NULL)
		return -1;
	Py_DECREF(r);
	return 0;
}

#endif
