"""One rank of the pipeline job tests/torch/test_p2p_default.py starts (as torchrun would: env vars).

Three steps of a 3-stage chain (rank 0 sends to 1, 1 receives and sends to 2, 2 receives) and an all_reduce,
traced with ``TT_CARRIAGE`` (default: ``instrument()``'s own). Every point-to-point message the process group
moves is counted at ``ProcessGroup.send`` / ``recv`` (where torch.distributed's own functions end, side messages
included) and written with the spans to ``$TT_TEST_OUT``.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from tempotrace_sdk import torch as tt
from tempotrace_sdk.otel import configure

OUT = Path(os.environ["TT_TEST_OUT"])
RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
moved: Counter[str] = Counter()


def counting(name: str) -> None:
    original = getattr(dist.ProcessGroup, name)

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        moved[name] += 1
        return original(self, *args, **kwargs)

    setattr(dist.ProcessGroup, name, counted)


for method in ("send", "recv", "recv_anysource"):
    counting(method)
handle = configure(service_name="pipeline", export_path=OUT / f"spans-{RANK}.jsonl")
dist.init_process_group("gloo")
carriage = os.environ.get("TT_CARRIAGE")
if carriage:
    tt.instrument(carriage=carriage)
else:
    tt.instrument()
activation = torch.ones(1024)
for _ in range(3):
    with tt.step():
        if RANK > 0:
            dist.recv(activation, src=RANK - 1)
        activation = activation * 1.5  # this stage's work
        if RANK < WORLD - 1:
            dist.send(activation, dst=RANK + 1)
        dist.all_reduce(torch.ones(4))
tt.uninstrument()
dist.destroy_process_group()
handle.shutdown()
(OUT / f"result-{RANK}.json").write_text(json.dumps({"moved": dict(moved), "mode": carriage or "default"}))
# Everything is on disk. Skip the interpreter's teardown (as training_worker.py says why): under load gloo
# now and then aborts a rank in it, which says nothing of tracing.
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
