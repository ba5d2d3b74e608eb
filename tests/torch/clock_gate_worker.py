"""One rank of the 3-rank gloo jobs tests/torch/test_clock_gate.py starts: the README's clock check, both forms.

First ``tt.check_clocks()`` (warns and trains on), then a line on stdout saying this rank went on, then
``tt.check_clocks(require=$TT_REQUIRE)`` (the gate), then a line saying it passed. Each rank's clock comes
from ``TEMPOTRACE_CLOCK``; stdout and stderr go to the rank's log (rank_job.py).
"""

from __future__ import annotations

import os
import sys

import torch.distributed as dist

from tempotrace_sdk import torch as tt
from tempotrace_sdk.otel import configure

TRAINED_ON = "tt-test: trained on after the warning"
PASSED = "tt-test: passed the gate"

if __name__ == "__main__":
    rank = int(os.environ["RANK"])
    handle = configure(service_name="clock-gate-test", export_path=os.path.join(os.environ["TT_TEST_OUT"],
                                                                                 f"spans-{rank}.jsonl"))
    dist.init_process_group("gloo")
    tt.check_clocks(rounds=4)
    print(TRAINED_ON, flush=True)
    tt.check_clocks(rounds=4, require=os.environ["TT_REQUIRE"])
    print(PASSED, flush=True)
    dist.destroy_process_group()
    handle.shutdown()
    # Everything is on disk. Skip the interpreter's teardown (as training_worker.py says why): under load gloo
    # now and then aborts a rank in it, which says nothing of tracing.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
