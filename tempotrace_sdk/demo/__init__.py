"""The ``tempotrace demo``: a traced multi-process training step with simulated skewed clocks.

For demonstration and end-to-end tests; see ``tempotrace demo --help``.
"""

from .coordinator import run_demo
from .model import DemoConfig, DemoResult
from .plan import RankPlan, plan_ranks

__all__ = ["DemoConfig", "DemoResult", "RankPlan", "plan_ranks", "run_demo"]
