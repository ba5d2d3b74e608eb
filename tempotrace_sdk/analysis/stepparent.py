"""Which missing parent is missing by design: the torch step's virtual parent (spec/analysis.md §5.2).

``step(i)`` starts every rank's step span as the child of a *virtual* remote
parent whose ids each rank derives from the job id, the restart count and the
step number (spec/torch.md §4.1), so that the step spans of all ranks are
siblings in one trace. That parent is never exported: every step span's parent
is absent from the input, by design, and counting it as lost data would put a
warning on every torch trace.

A span is a step span when it is named ``torch.step`` and carries
``tempotrace.torch.step``. Where it names its job (``tempotrace.job_id`` on the
span or its Resource), its trace id and parent id must be the ones that job,
restart, step and occurrence (``tempotrace.torch.step_occurrence``, 0 when
absent: a step number used again, spec/torch.md §4.1) derive: a step span whose parent does not match lost a real
parent. Where it names none (the ranks agreed on a job id at the first step,
which no span records), the attribute is taken at its word.
"""

from __future__ import annotations

from functools import lru_cache

from ..wire.torchkeys import step_ids  # pure: imports neither torch nor OpenTelemetry
from .events import SpanRecord

__all__ = ["STEP_SPAN", "is_virtual_step_parent"]

#: The step span's name (spec/torch.md §4.1, semantic-conventions §9.4).
STEP_SPAN = "torch.step"


@lru_cache(maxsize=4096)  # the step spans of all ranks of one step ask alike
def _derived(job_id: str, restart: int, step: int, occurrence: int) -> tuple[str, str]:
    trace_id, parent_id = step_ids(job_id, restart, step, occurrence)
    return f"{trace_id:032x}", f"{parent_id:016x}"


def is_virtual_step_parent(s: SpanRecord) -> bool:
    """True when ``s`` is a step span and its (absent) parent is the step's virtual parent."""
    if s.step is None or s.name != STEP_SPAN or not s.parent_id:
        return False
    if s.job is None:
        return True
    return _derived(s.job[0], s.job[1], s.step, s.step_occurrence) == (s.trace_id, s.parent_id)
