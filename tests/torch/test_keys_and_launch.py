"""Group keys and step ids every rank computes alike (spec/torch.md §2, §4), and the launch environment
(spec/semantic-conventions.md §9.1)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tempotrace_sdk.torch.keys import group_key, parse_group_key, step_ids
from tempotrace_sdk.torch.launch import install_launch_facts, job_id_from_env, launch_facts


@pytest.mark.parametrize(("ranks", "key"), [
    ([0, 1, 2, 3], "0-3"),
    ([3], "3"),
    ([0, 2, 4, 6], "0-6:2"),
    ([1, 4, 5], "1,4-5"),
    ([0, 1], "0-1"),
    ([0, 8], "0,8"),
    (list(range(2048)), "0-2047"),
    (list(range(3, 2048, 8)), "3-2043:8"),
    ([0, 1, 2, 10, 20, 30], "0-2,10-30:10"),
])
def test_group_key_table(ranks: list[int], key: str) -> None:
    assert group_key(ranks) == key
    assert parse_group_key(key) == ranks


@given(st.lists(st.integers(0, 5000), min_size=1, max_size=60, unique=True).map(sorted))
def test_group_key_round_trips(ranks: list[int]) -> None:
    assert parse_group_key(group_key(ranks)) == ranks


def test_group_key_refuses_an_empty_group() -> None:
    with pytest.raises(ValueError):
        group_key([])


def test_step_ids_are_a_pure_function_of_job_restart_and_step() -> None:
    """§4.1: BLAKE2b-192 of the job, restart and step: same on every rank, distinct across steps and jobs."""
    import hashlib

    trace_id, span_id = step_ids("job-a", 0, 7)
    digest = hashlib.blake2b(b"tempotrace-step\0job-a\x000\x007", digest_size=24).digest()
    assert (trace_id, span_id) == (int.from_bytes(digest[:16], "big"), int.from_bytes(digest[16:], "big"))
    seen = {step_ids(job, restart, step) for job in ("a", "b") for restart in (0, 1) for step in range(50)}
    assert len(seen) == 200
    with pytest.raises(ValueError):
        step_ids("a", 0, -1)


ENV = {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "GROUP_RANK": "2", "TORCHELASTIC_RUN_ID": "run-9",
       "TORCHELASTIC_RESTART_COUNT": "1"}


def test_launch_facts_from_a_torchrun_environment() -> None:
    facts = launch_facts(ENV)
    assert facts is not None
    assert (facts.rank, facts.world_size, facts.local_rank, facts.node_rank, facts.job_id, facts.restart) == (
        5, 8, 1, 2, "run-9", 1)


def test_no_launch_without_rank_and_world_size() -> None:
    assert launch_facts({}) is None
    assert launch_facts({"RANK": "0"}) is None


@pytest.mark.parametrize(("env", "variable"), [
    ({"RANK": "x", "WORLD_SIZE": "4"}, "RANK"),
    ({"RANK": "4", "WORLD_SIZE": "4"}, "RANK"),
    ({"RANK": "0", "WORLD_SIZE": "0"}, "WORLD_SIZE"),
    ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "-1"}, "LOCAL_RANK"),
])
def test_a_malformed_launch_variable_is_named(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ValueError, match=variable):
        launch_facts(env)


def test_job_id_prefers_ours_and_ignores_torchruns_default() -> None:
    assert job_id_from_env({"TEMPOTRACE_JOB_ID": "mine", "TORCHELASTIC_RUN_ID": "run"}) == "mine"
    assert job_id_from_env({"TORCHELASTIC_RUN_ID": "run"}) == "run"
    assert job_id_from_env({"TORCHELASTIC_RUN_ID": "none"}) is None
    assert job_id_from_env({}) is None


def test_every_span_carries_the_launch_facts_once_installed() -> None:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    assert install_launch_facts(provider, ENV) is not None
    install_launch_facts(provider, {**ENV, "RANK": "6"})  # again: refreshed, not added twice
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.get_tracer("t").start_span("op").end()
    (span,) = exporter.get_finished_spans()
    assert span.attributes is not None
    assert span.attributes["tempotrace.rank"] == 6 and span.attributes["tempotrace.world_size"] == 8
    assert span.attributes["tempotrace.job_id"] == "run-9" and span.attributes["tempotrace.node_rank"] == 2
    assert len(provider._active_span_processor._span_processors) == 2
    assert install_launch_facts(TracerProvider(), {}) is None


def test_configure_under_torchrun_writes_the_rank(tmp_path: object) -> None:
    """configure() itself reads the environment: a child process started as torchrun would start it."""
    code = (
        "from opentelemetry import trace\n"
        "from tempotrace_sdk.otel import configure, span\n"
        "import json, sys\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "exp = InMemorySpanExporter(); h = configure(exporter=exp, batch=False, clock='sim:ptp')\n"
        "with span('x'): pass\n"
        "a = dict(exp.get_finished_spans()[0].attributes)\n"
        "print(json.dumps([a['tempotrace.rank'], a['tempotrace.world_size'], 'torch' in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env={**ENV, "PATH": "/usr/bin:/bin"}, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert out.strip() == "[5, 8, false]"


def test_importing_the_sdk_and_the_torch_package_does_not_import_torch() -> None:
    code = ("import sys, tempotrace_sdk, tempotrace_sdk.torch, tempotrace_sdk.torch.launch, "
            "tempotrace_sdk.torch.record, tempotrace_sdk.torch.keys; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"


def test_public_names_stay_functions_whatever_was_imported_first() -> None:
    """A submodule named like a public function would replace it on the package once imported."""
    code = ("from tempotrace_sdk import torch as tt\n"
            "tt.comm_hook; tt.check_clocks\n"  # these import the other modules first
            "import inspect\n"
            "print(all(not inspect.ismodule(getattr(tt, n)) for n in tt.__all__))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "True"
