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

/* lock.acquire() or lock.release() (a threading.Lock: an acquire waits with the GIL released). */
static inline int call_lock(PyObject *lock, PyObject *method)
{
	PyObject *r = PyObject_CallMethodNoArgs(lock, method);
	if (r == NULL)
		return -1;
	Py_DECREF(r);
	return 0;
}

#endif
