"""One rank of the 2-rank gloo job tests/torch/test_training_loop.py starts: the README's training loop.

configure(), init_process_group("gloo"), check_clocks() (warns and trains on), instrument(), a DDP model
with comm_hook(), then:

- with ``trace_compute(model, opt)``: ``EPOCHS`` epochs of ``BATCHES`` batches, each ``with tt.step():``
  (counted);
- after its ``remove()``: ``EPOCHS`` epochs numbering their batches with ``enumerate``:
  ``with tt.step(i):`` (numbers reused).

Spans go to ``$OUT/spans-<rank>.jsonl``; what the test asserts on beyond them (the carriage counters, the
steps' numbers as the program saw them) to ``$OUT/result-<rank>.json``; warnings to the rank's log.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from tempotrace_sdk import torch as tt
from tempotrace_sdk.otel import configure

EPOCHS = 3
BATCHES = 4


def train(model: torch.nn.Module, opt: torch.optim.Optimizer) -> None:
    x = torch.randn(8, 16)
    loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


def main() -> None:
    out, rank = Path(os.environ["TT_TEST_OUT"]), int(os.environ["RANK"])
    handle = configure(service_name="training-loop-test", export_path=out / f"spans-{rank}.jsonl", batch=False)
    dist.init_process_group("gloo")
    tt.check_clocks(rounds=2)
    tt.instrument()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)))
    model.register_comm_hook(None, tt.comm_hook())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    compute = tt.trace_compute(model, opt)
    counted: list[int | None] = []
    for _epoch in range(EPOCHS):
        for _batch in range(BATCHES):
            with (step := tt.step()):  # the README's loop
                train(model, opt)
            counted.append(step.number)
    compute.remove()
    numbered: list[int | None] = []
    for _epoch in range(EPOCHS):
        for i in range(BATCHES):
            with (step := tt.step(i)):  # issue 21's loop: every epoch reuses 0..BATCHES-1
                train(model, opt)
            numbered.append(step.number)
    tt.uninstrument()
    result = {"counts": tt.carriage_counts(), "counted": counted, "numbered": numbered}
    del model, opt  # DDP's reducer holds the process group: let it go before the group is destroyed
    dist.destroy_process_group()
    handle.shutdown()
    (out / f"result-{rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
    # Everything is on disk (spans flushed, result written). Skip the interpreter's teardown, as the demo's
    # ranks do (tempotrace_sdk/demo/rank.py): under load gloo now and then aborts a rank in it (SIGABRT,
    # "terminate called without an active exception", from a C++ thread torch tears down; seen in CI on
    # rank 0 after its work was done), which says nothing of tracing.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
