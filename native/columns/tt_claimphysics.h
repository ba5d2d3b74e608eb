/*
 * tt_claimphysics.h - a collective claim's physics when no stamp names a host clock domain (tt_claimphysics.c).
 */
#ifndef TT_CLAIMPHYSICS_H
#define TT_CLAIMPHYSICS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* wire.layout.UNCERTAINTY_SATURATED (the module exports it; claims_absolute.py checks the two agree) */
#define TT_UNCERTAINTY_SATURATED 65535

/* claim_physics's first item: what claims_absolute.absolute_physics answers */
#define TT_CLAIM_SILENT 0 /* None */
#define TT_CLAIM_BEFORE 1 /* BEFORE, the room, no witnesses */
#define TT_CLAIM_AFTER 2  /* AFTER, the worst excess, the witnesses [(start, end, excess)] */

/* claim_physics(starts, ends, start_stamps, end_stamps, extra, stamp_type) -> (code, value, witnesses) | None;
 * None where it declines (not the plain case): the Python pass answers. */
PyObject *tt_claim_physics(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
