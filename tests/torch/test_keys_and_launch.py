"""Group keys and step ids every rank computes alike (spec/torch.md §2, §4), and the launch environment
(spec/semantic-conventions.md §9.1)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tempotrace_sdk.launch import job_id_from_env, launch_facts
from tempotrace_sdk.wire.torchkeys import group_key, parse_group_key, step_ids


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


_CONFIGURE_CHILD = (
    "from opentelemetry import trace\n"
    "from opentelemetry.sdk.trace import TracerProvider\n"
    "from tempotrace_sdk.otel import configure, span\n"
    "import json, sys\n"
    "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
    "if sys.argv[1] == 'own': trace.set_tracer_provider(TracerProvider())\n"
    "exp = InMemorySpanExporter(); h = configure(exporter=exp, batch=False, clock='sim:ptp')\n"
    "with span('x'): pass\n"
    "s = exp.get_finished_spans()[0]\n"
    "keys = ('tempotrace.rank', 'tempotrace.world_size', 'tempotrace.job_id', 'tempotrace.node_rank')\n"
    "print(json.dumps({'resource': [s.resource.attributes.get(k) for k in keys],\n"
    "                  'span': [s.attributes.get(k) for k in keys], 'torch': 'torch' in sys.modules}))\n"
)


@pytest.mark.parametrize("provider", ["configure's", "own"])
def test_configure_under_torchrun_says_the_rank_on_every_span(provider: str) -> None:
    """configure() itself reads the environment (a child started as torchrun would start it): the launch
    facts go on the Resource of the provider it makes, like the host, and on each span of a provider the
    program made itself (its Resource cannot change); the analysis reads either (§9.1)."""
    out = subprocess.run([sys.executable, "-c", _CONFIGURE_CHILD, provider], env={**ENV, "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=120, check=True).stdout
    got = json.loads(out)
    facts = [5, 8, "run-9", 2]
    assert got["torch"] is False
    if provider == "own":
        assert got["span"] == facts and got["resource"] == [None] * 4
    else:
        assert got["resource"] == facts and got["span"] == [None] * 4


def test_importing_the_sdk_and_the_torch_package_does_not_import_torch() -> None:
    code = ("import sys, tempotrace_sdk, tempotrace_sdk.torch, tempotrace_sdk.launch, "
            "tempotrace_sdk.torch.carriage, tempotrace_sdk.wire.torchrecord, tempotrace_sdk.wire.torchkeys, "
            "tempotrace_sdk.torchops, tempotrace_sdk.semconv; print('torch' in sys.modules)")
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
