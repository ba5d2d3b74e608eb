"""The demo's configuration and result values."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .plan import RankPlan

__all__ = ["DEFAULT_OUT", "DemoConfig", "DemoResult"]

DEFAULT_OUT = Path("tempotrace-demo-out")


@dataclass
class DemoConfig:
    ranks: int = 4
    iterations: int = 3  #: training steps
    out: Path = DEFAULT_OUT
    liar: bool = True
    liar_offset_ns: float | None = None
    seed: int = 1
    #: False: the real training job under torchrun (gloo); True: the imitation of a step over HTTP
    http: bool = False
    #: how the torch ranks carry tt-ext records (tempotrace_sdk.torch.instrument): "none" | "step" | "op"
    carriage: str = "step"


@dataclass
class DemoResult:
    plans: list[RankPlan]
    report: dict[str, Any]  #: the analysis report's to_dict()
    paths: dict[str, Path]
    hops_sent: int  #: HTTP hops the workload made (0 for the torchrun job)
    elapsed_s: float
    checks: dict[str, bool] = field(default_factory=dict)
    #: checks this run cannot make, with the reason (printed, never counted as passed or failed)
    not_checked: dict[str, str] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)  #: a few edges told in words
    naive_hops: int = 0  #: hops / p2p messages whose raw timestamps put the receive before the send
    #: decisions on cross-rank edges with an NTP-class end (saturated bound): physics must be 0
    saturated_hops: dict[str, int] = field(default_factory=dict)
    #: the torchrun job: rank 0's check_clocks result, each rank's result file, the analysis of collectives
    clock_check: dict[str, Any] | None = None
    rank_results: list[dict[str, Any]] = field(default_factory=list)
    torch: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(self.checks.values())
