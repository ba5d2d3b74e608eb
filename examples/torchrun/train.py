"""A small DDP job traced with TempoTrace: run it with torchrun.

    torchrun --nproc-per-node 4 examples/torchrun/train.py

Each rank: configure() (it reads RANK / WORLD_SIZE / the job id torchrun sets),
a clock check against rank 0, then a few epochs of DDP steps with every
collective traced, and forward / backward / optimizer.step spans. All ranks
append their spans to one OTLP JSON-lines file (TEMPOTRACE_EXPORT_PATH,
default tempotrace-spans-<job id>.jsonl). TEMPOTRACE_CLOCK picks each rank's clock.
With TT_EXAMPLE_SIMULATE=1 (one machine has one clock) every rank gets a
simulated PTP-class clock (sim:ptp) except the last, which gets the simulated
liar (sim:liar: 10 ms off, claiming 220 ns). TT_EXAMPLE_REQUIRE=DEGRADED makes
the clock check a gate: the job stops there, rank 0 saying why, when a clock
is unsynchronised or lies.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from tempotrace_sdk import torch as tt
from tempotrace_sdk.otel import configure

EPOCHS, BATCHES = 2, 3

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
clock = None
if os.environ.get("TT_EXAMPLE_SIMULATE") == "1":
    clock = "sim:liar" if rank == world - 1 else f"sim:ptp,seed={rank}"
handle = configure(service_name="train", clock=clock)
dist.init_process_group("gloo")

# Without require: warns (rank 0, once) and trains on. require="DEGRADED" gates: exit 1, saying why.
check = tt.check_clocks(rounds=8, require=os.environ.get("TT_EXAMPLE_REQUIRE"))
if rank == 0:
    print(check.describe())

tt.instrument()  # carriage "step": one small exchange per step
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                                                       torch.nn.Linear(64, 1)))
model.register_comm_hook(None, tt.comm_hook())  # gradient buckets: a span each, parent the step
opt = torch.optim.SGD(model.parameters(), lr=0.05)
compute = tt.trace_compute(model, opt)  # forward / backward / optimizer.step spans, parent the step
for epoch in range(EPOCHS):
    for _batch in range(BATCHES):
        with (step := tt.step()):  # counted: one trace per step, whatever the epoch
            x = torch.randn(64, 32)
            loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            dist.all_reduce(loss.detach(), op=dist.ReduceOp.AVG)  # traced like any collective
        if rank == 0:
            print(f"epoch {epoch} step {step.number}: loss {loss.item():.3f}")
compute.remove()
tt.uninstrument()
if rank == 0:
    print("carried records:", tt.carriage_counts())
del model, opt  # DDP's reducer holds the process group: let it go before the group is destroyed
dist.destroy_process_group()
handle.shutdown()
