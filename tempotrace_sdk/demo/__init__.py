"""The ``tempotrace demo``: a traced training job whose ranks' clocks disagree, analysed.

By default a real ``torchrun`` job on CPU (gloo): DDP, a pipeline over
send/recv, a barrier; with ``http=True`` the older imitation of a step over
HTTP between processes; ``hang_demo.run_hang_demo`` (``--hang``) a job in
which one rank stops, and the hang report of its flight-recorder dumps. For
demonstration and end-to-end tests; see ``tempotrace demo --help``.
"""

from .coordinator import run_demo
from .model import DemoConfig, DemoResult
from .plan import RankPlan, plan_ranks

__all__ = ["DemoConfig", "DemoResult", "RankPlan", "plan_ranks", "run_demo"]
