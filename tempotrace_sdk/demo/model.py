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
    iterations: int = 3
    out: Path = DEFAULT_OUT
    liar: bool = True
    liar_offset_ns: float | None = None
    seed: int = 1


@dataclass
class DemoResult:
    plans: list[RankPlan]
    report: dict[str, Any]  #: the analysis report's to_dict()
    paths: dict[str, Path]
    hops_sent: int
    elapsed_s: float
    checks: dict[str, bool] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)  #: a few hops told in words
    naive_hops: int = 0  #: hops whose raw timestamps put the receive before the send
    #: decisions on hops with an NTP-class end (saturated bound): physics must be 0
    saturated_hops: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(self.checks.values())
