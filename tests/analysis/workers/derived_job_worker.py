"""One rank of the real gloo job tests/analysis/test_analysis_derived_job.py starts (as torchrun would: env vars).

Three steps, traced with ``TT_CARRIAGE`` (nothing carried between ranks with "none"): a pipeline (rank 0 sends to
1, each rank receives from the one before, works, sends to the next), an isend/irecv pair back from the last
rank to rank 0 waited on, an all_reduce and a broadcast from rank 0. Spans go to ``$TT_TEST_OUT/spans-<rank>.jsonl``.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.distributed as dist

from tempotrace_sdk import torch as tt
from tempotrace_sdk.otel import configure

OUT = Path(os.environ["TT_TEST_OUT"])
RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])

handle = configure(service_name="derived-job", export_path=OUT / f"spans-{RANK}.jsonl")
dist.init_process_group("gloo")
tt.instrument(carriage=os.environ.get("TT_CARRIAGE", "none"))
activation = torch.ones(256)
for _ in range(3):
    with tt.step():
        if RANK > 0:
            dist.recv(activation, src=RANK - 1)
        activation = activation * 1.5  # this stage's work
        if RANK < WORLD - 1:
            dist.send(activation, dst=RANK + 1)
        if RANK == WORLD - 1:
            dist.isend(activation, dst=0).wait()
        if RANK == 0:
            dist.irecv(activation, src=WORLD - 1).wait()
        dist.all_reduce(torch.ones(4))
        dist.broadcast(torch.ones(4), src=0)
tt.uninstrument()
dist.destroy_process_group()
handle.shutdown()
