"""The shared 4-rank gloo job (torch_job.py): started once per session, for every test module here."""

from __future__ import annotations

import pytest
from torch_job import Job, run_job  # tests/torch is on sys.path (a package here would be named torch)


@pytest.fixture(scope="session")
def job(tmp_path_factory: pytest.TempPathFactory) -> Job:
    pytest.importorskip("torch")
    return run_job(tmp_path_factory.mktemp("torch-job"))
