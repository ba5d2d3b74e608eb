/*
 * tt_opspans.h - ended op records straight into OTLP JSON spans
 * (tempotrace_sdk._opcall.encode_ended; spec/torch.md §1.4, "Spans from records").
 *
 * Part of the _opcall extension; tt_opcall.c registers the function.
 */
#ifndef TT_OPSPANS_H
#define TT_OPSPANS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/*
 * encode_ended(ring, low, last, owner, nonce, nonce_high, groups, ranks, ops, parent_of, roots, leap, epochs,
 *              keys, completions, qualities) -> (items, left, first_waiting, lost)
 *
 * Takes, as Recorder.take_ended does, every ENDED record numbered low..last-1 whose span it can write
 * exactly as torch/opspans.py make_span and otel/otlp_json.py would, and returns:
 *   items          [(owner, span JSON bytes)], oldest first (an unsampled op's record is taken, no item);
 *   left           the numbers of the ENDED records it left for Python, still ENDED;
 *   first_waiting  the first number still open, being written or ended (-1: none);
 *   lost           records taken whose span could not be written (no memory): counted by the caller.
 * The arguments are what torch/opspans.py builds once per release (its docstring says what each is);
 * epochs() checks the host clock domain, after the scan has seen every record it takes ended.
 */
PyObject *tt_encode_ended(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
