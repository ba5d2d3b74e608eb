"""A small DDP job traced with TempoTrace: run it with torchrun.

    torchrun --nproc-per-node 4 examples/torchrun/train.py

Each rank: configure() (it reads RANK / WORLD_SIZE / the job id torchrun sets),
a clock check against rank 0, then a few DDP steps with every collective traced.
All ranks append their spans to one OTLP JSON-lines file (TEMPOTRACE_EXPORT_PATH,
default tempotrace-spans.jsonl). TEMPOTRACE_CLOCK picks each rank's clock. With
TT_EXAMPLE_SIMULATE=1 (one machine has one clock) every rank gets a simulated
PTP-class clock (sim:ptp) except the last, which gets the simulated liar
(sim:liar: 10 ms off, claiming 220 ns).
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from tempotrace_sdk import torch as tt
from tempotrace_sdk.otel import configure

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
clock = None
if os.environ.get("TT_EXAMPLE_SIMULATE") == "1":
    clock = "sim:liar" if rank == world - 1 else f"sim:ptp,seed={rank}"
handle = configure(service_name="train", clock=clock)
dist.init_process_group("gloo")

check = tt.check_clocks(rounds=8)  # add require="DEGRADED" to stop the job on a lying clock
if rank == 0:
    print(check.describe())

tt.instrument()  # carriage "step": one small exchange per step
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                                                       torch.nn.Linear(64, 1)))
model.register_comm_hook(None, tt.comm_hook())  # gradient buckets: a span each, parent the step
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for i in range(5):
    with tt.step(i):
        x = torch.randn(64, 32)
        loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        dist.all_reduce(loss.detach(), op=dist.ReduceOp.AVG)  # traced like any collective
    if rank == 0:
        print(f"step {i}: loss {loss.item():.3f}")
tt.uninstrument()
if rank == 0:
    print("carried records:", tt.carriage_counts())
del model, opt  # DDP's reducer holds the process group: let it go before the group is destroyed
dist.destroy_process_group()
handle.shutdown()
