"""The launcher's environment (torchrun / torchelastic): which rank this process is.

``configure()`` reads them with ``launch_facts()``: when the process was
started by a launcher that sets RANK and WORLD_SIZE, every span says
``tempotrace.rank`` and the other launch facts (spec/semantic-conventions.md
§9.1) -- on the Resource of the provider ``configure()`` makes, like the host,
else on each span (otel/process.py) -- so reports can show one row per rank
even when eight ranks share a host. Imports neither torch nor anything that does.

==============================  ==============================================
RANK, WORLD_SIZE                global rank and job size (both required)
LOCAL_RANK                      rank within the node (default: RANK)
GROUP_RANK                      the node's rank (torchrun); optional
TEMPOTRACE_JOB_ID               the job id; else TORCHELASTIC_RUN_ID unless it is
                                torchrun's default "none"
TORCHELASTIC_RESTART_COUNT      restarts so far (default 0)
==============================  ==============================================
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

from .semconv import JOB_ID, LOCAL_RANK, NODE_RANK, RANK, RESTART, WORLD_SIZE

__all__ = ["JOB_ID_ENV", "LaunchFacts", "launch_facts"]

_log = logging.getLogger(__name__)

JOB_ID_ENV = "TEMPOTRACE_JOB_ID"
#: torchrun's --rdzv-id default: every job launched without one shares it, so it names no job.
_TORCHRUN_DEFAULT_RUN_ID = "none"


@dataclass(frozen=True, slots=True)
class LaunchFacts:
    rank: int
    world_size: int
    local_rank: int
    node_rank: int | None
    job_id: str | None  #: None: the environment names no job (step() then agrees on one, spec/torch.md §4)
    restart: int

    def attributes(self) -> dict[str, int | str]:
        attrs: dict[str, int | str] = {
            RANK: self.rank,
            WORLD_SIZE: self.world_size,
            LOCAL_RANK: self.local_rank,
            RESTART: self.restart,
        }
        if self.node_rank is not None:
            attrs[NODE_RANK] = self.node_rank
        if self.job_id is not None:
            attrs[JOB_ID] = self.job_id
        return attrs


def _int_var(env: Mapping[str, str], name: str, default: int | None, low: int = 0) -> int | None:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None
    if value < low:
        raise ValueError(f"{name} must be at least {low}, got {value}")
    return value


def job_id_from_env(env: Mapping[str, str] | None = None) -> str | None:
    """TEMPOTRACE_JOB_ID, else TORCHELASTIC_RUN_ID unless it is torchrun's default; else None."""
    env = os.environ if env is None else env
    explicit = env.get(JOB_ID_ENV, "").strip()
    if explicit:
        return explicit
    run_id = env.get("TORCHELASTIC_RUN_ID", "").strip()
    return run_id if run_id and run_id != _TORCHRUN_DEFAULT_RUN_ID else None


def launch_facts(env: Mapping[str, str] | None = None) -> LaunchFacts | None:
    """The launch facts, or None when RANK or WORLD_SIZE is unset (not a distributed launch).

    A variable that is set but malformed (``RANK=abc``, ``RANK=4`` with
    ``WORLD_SIZE=4``) raises ValueError naming it: a launch mistake is loud.
    """
    env = os.environ if env is None else env
    rank = _int_var(env, "RANK", None)
    world = _int_var(env, "WORLD_SIZE", None, low=1)
    if rank is None or world is None:
        return None
    if rank >= world:
        raise ValueError(f"RANK must be below WORLD_SIZE ({world}), got {rank}")
    local = _int_var(env, "LOCAL_RANK", rank)
    restart = _int_var(env, "TORCHELASTIC_RESTART_COUNT", 0)
    assert local is not None and restart is not None
    return LaunchFacts(rank, world, local, _int_var(env, "GROUP_RANK", None), job_id_from_env(env), restart)
