"""One rank of the 2-rank gloo jobs tests/torch/test_tracebacks.py starts: a DDP all-reduce that fails.

``TT_MODE=plain``: a DDP model with torch's own ``allreduce_hook`` registered directly, nothing of ours
imported. ``TT_MODE=traced``: the README's way (configure, instrument, ``tt.comm_hook()``, ``tt.step()``).
Everything else, lines included, is the same script. Rank 1 leaves (exit 7) a while after both ranks built
the model, as a crashing worker would; rank 0's backward, already waiting in the bucket's all-reduce, fails
with gloo's "Connection closed by peer" and the job dies of it: its traceback is what the test compares.
"""

from __future__ import annotations

import contextlib
import os
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

TRACED = os.environ["TT_MODE"] == "traced"
#: Long enough for rank 0 to be inside the all-reduce (its hook returned) when rank 1 leaves.
LEAVE_AFTER_S = 2.0

if TRACED:
    from tempotrace_sdk import torch as tt
    from tempotrace_sdk.otel import configure

    configure(service_name="traceback-test", export_path=os.path.join(os.environ["TT_TEST_OUT"],
                                                                       f"spans-{os.environ['RANK']}.jsonl"))
dist.init_process_group("gloo")
if TRACED:
    tt.instrument()
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 2))
model.register_comm_hook(None, tt.comm_hook() if TRACED else allreduce_hook)
dist.barrier()
if dist.get_rank() == 1:
    time.sleep(LEAVE_AFTER_S)
    os._exit(7)
with tt.step() if TRACED else contextlib.nullcontext():
    loss = model(torch.randn(4, 8)).sum()
    loss.backward()
print("tt-test: backward returned")
