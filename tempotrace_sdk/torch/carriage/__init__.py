"""Carriage: tt-ext records carried between ranks, beside the spans every mode makes (spec/torch.md §3).

- ``records``: a record made on a span, carried as a tensor, merged where it
  is received; ``Exchange``, one all_gather of every rank's record (§3.1-§3.4);
- ``owed``: step exchanges owed by a step that raised, paid before this
  rank's next collective (§4.2);
- ``side``, ``couriers``: point-to-point side messages, posted beside their
  data, and the threads that see them out and in (§3.3); only the modes in
  ``SIDE_MODES`` send them.

The modes are here, importing nothing, so that a module that only asks which
mode is on does not load the carriage machinery.
"""

from __future__ import annotations

__all__ = ["MODES", "SIDE_MODES", "STEP_MODES"]

MODES = ("none", "step", "step+p2p", "op")
#: The modes whose point-to-point sends are followed by a side message (§3.3): not the default, which adds no
#: message to a point-to-point op (the analysis derives their order from the matched pairs, analysis.md).
SIDE_MODES = frozenset(("step+p2p", "op"))
#: The modes with one exchange per step (§4.2).
STEP_MODES = frozenset(("step", "step+p2p"))
