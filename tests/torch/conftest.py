"""Fixtures for every test module here: the shared 4-rank gloo job (torch_job.py), started once per session;
a one-rank gloo group in this process; an in-memory exporter for the torch spans."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from torch_job import Job, run_job  # tests/torch is on sys.path (a package here would be named torch)


@pytest.fixture(scope="session")
def job(tmp_path_factory: pytest.TempPathFactory) -> Job:
    pytest.importorskip("torch")
    return run_job(tmp_path_factory.mktemp("torch-job"))


@pytest.fixture(scope="module")
def group() -> Iterator[None]:
    """A one-rank gloo group in this process (torch is imported only by the modules that need it)."""
    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The torch spans go to an in-memory exporter; instrumentation is undone after the test."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tempotrace_sdk import torch as tt
    from tempotrace_sdk.torch import opspans
    from tempotrace_sdk.torch import spans as torch_spans

    class FlushedFirst(InMemorySpanExporter):
        """Recorded ops' spans are made at a flush (spec/torch.md §1.4): reading the spans is one."""

        def get_finished_spans(self) -> Any:
            opspans.release(force=True)
            return super().get_finished_spans()

    exp = FlushedFirst()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exp))
    monkeypatch.setattr(torch_spans, "tracer", lambda: provider.get_tracer("test"))
    yield exp
    tt.uninstrument()
