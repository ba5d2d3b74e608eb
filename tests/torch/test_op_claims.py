"""Each traced op's claim is stated once, beside its arguments in torchops.SPECS (spec/analysis.md §1.3), and
semconv.TORCH_CLAIMS is derived from it: every collective the instrumentation wraps has one, nothing else does,
and the analysis and the demo read that list. An op missing from it would have been silently "no_claim" in
every report."""

from __future__ import annotations

from tempotrace_sdk import semconv
from tempotrace_sdk.analysis import claims
from tempotrace_sdk.demo import torch_story
from tempotrace_sdk.torchops import SPECS, Kind


def test_every_wrapped_collective_has_a_claim_and_nothing_else_does() -> None:
    collectives = {spec.name for spec in SPECS if spec.kind is Kind.COLLECTIVE}
    assert set(semconv.TORCH_CLAIMS) == collectives


def test_a_rooted_claim_belongs_to_an_op_with_a_root_and_only_those() -> None:
    rooted = {spec.name for spec in SPECS if spec.kind is Kind.COLLECTIVE and spec.root is not None}
    assert {op for op, claim in semconv.TORCH_CLAIMS.items() if claim != "all"} == rooted


def test_the_analysis_and_the_demo_read_the_one_list() -> None:
    assert claims.SHAPES is semconv.TORCH_CLAIMS
    assert torch_story.EVERY_START_BEFORE_EVERY_END == {op for op, c in semconv.TORCH_CLAIMS.items() if c == "all"}
