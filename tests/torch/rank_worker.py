"""One rank of the 4-rank gloo job that tests/torch/test_distributed.py starts (as torchrun would: env vars).

Runs every wrapped entry point once in step 0 (carriage "step+p2p"), a DDP model
and an FSDP1 model with the comm hook in step 1, a 2-stage pipeline and an all_reduce of the
subgroup of ranks 0-2 in step 2, per-op carriage with one corrupt record in step 3, the
subgroup's all_reduce and barrier with per-op carriage in step 4 (rank 3 idle), then
uninstruments and checks the originals are back. Spans go to ``$OUT/spans-<rank>.jsonl``; facts the test
asserts on go to ``$OUT/result-<rank>.json``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from tempotrace_sdk import torch as tt
from tempotrace_sdk.otel import configure
from tempotrace_sdk.torch.carriage import records

OUT = Path(os.environ["TT_TEST_OUT"])
RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
CORRUPT_RANK = 2  #: the rank whose op-mode record is corrupted once (step 3)
SUBGROUP = (0, 1, 2)  #: a group without the liar (steps 2 and 4)


def every_op(t: torch.Tensor) -> dict[str, object]:
    """Each wrapped collective once, then uneven p2p: rank 0 sends 3 to rank 1, rank 1 sends 1 back."""
    w, r = WORLD, RANK
    dist.all_reduce(t.clone())
    dist.all_reduce(t.clone(), async_op=True).wait()
    dist.all_gather([torch.zeros(4) for _ in range(w)], t)
    dist.all_gather_into_tensor(torch.zeros(4 * w), t)
    dist.all_gather_single(torch.zeros(4 * w), t)
    dist.reduce_scatter(torch.zeros(4), [t.clone() for _ in range(w)])
    dist.reduce_scatter_tensor(torch.zeros(4), torch.ones(4 * w))
    dist.reduce_scatter_single(torch.zeros(4), torch.ones(4 * w))
    dist.all_to_all([torch.zeros(4) for _ in range(w)], [t.clone() for _ in range(w)])
    dist.all_to_all_single(torch.zeros(4 * w), torch.ones(4 * w))
    dist.broadcast(t.clone(), src=1)
    dist.reduce(t.clone(), dst=2)
    dist.gather(t, [torch.zeros(4) for _ in range(w)] if r == 0 else None, dst=0)
    dist.scatter(torch.zeros(4), [t.clone() for _ in range(w)] if r == 3 else None, src=3)
    dist.barrier()
    gathered: list[object] = [None] * w
    dist.all_gather_object(gathered, {"rank": r})
    dist.gather_object(r, [None] * w if r == 0 else None, dst=0)
    dist.broadcast_object_list([r], src=0)
    dist.scatter_object_list([None], list(range(w)) if r == 1 else None, src=1)
    # ring of blocking send/recv (even ranks send first)
    nxt, prv = (r + 1) % w, (r - 1) % w
    if r % 2 == 0:
        dist.send(t, nxt)
        dist.recv(torch.zeros(4), prv)
    else:
        dist.recv(torch.zeros(4), prv)
        dist.send(t, nxt)
    # uneven p2p between ranks 0 and 1: isend/irecv, three one way and one back
    if r == 0:
        works = [dist.isend(t * k, 1) for k in range(3)]
        back = torch.zeros(4)
        works.append(dist.irecv(back, 1))
        for wk in works:
            wk.wait()
    elif r == 1:
        bufs = [torch.zeros(4) for _ in range(3)]
        works = [dist.irecv(b, 0) for b in bufs]
        works.append(dist.isend(t, 0))
        for wk in works:
            wk.wait()
        assert [float(b[0]) for b in bufs] == [0.0, 1.0, 2.0], bufs
    # objects between 2 and 3; an any-source receive on 3
    if r == 2:
        dist.send_object_list([{"hello": 3}], dst=3)
        dist.send(t * 7, 3)
    elif r == 3:
        got: list[object] = [None]
        dist.recv_object_list(got, src=2)
        assert got == [{"hello": 3}], got
        buf = torch.zeros(4)
        sender = dist.recv(buf)  # any source
        assert sender == 2 and float(buf[0]) == 7.0, (sender, buf)
    return {}


def batch_with(pre: dist.P2POp | None) -> None:
    """batch_isend_irecv on the ring with a P2POp made earlier (``pre``) and one made now."""
    nxt, prv = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    buf = torch.zeros(4)
    send = pre if pre is not None else dist.P2POp(dist.isend, torch.full((4,), float(RANK)), nxt)
    recv = dist.P2POp(dist.irecv, buf, prv)
    for wk in dist.batch_isend_irecv([send, recv]):
        wk.wait()
    assert float(buf[0]) == float(prv), buf


def ddp_step() -> None:
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 4))
    model.register_comm_hook(None, tt.comm_hook())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(torch.randn(16, 8)).pow(2).mean()
    loss.backward()
    opt.step()


def fsdp_step() -> None:
    """FSDP1, fully sharded, on CPU: its reduce-scatter hook wrapped by comm_hook()."""
    from torch.distributed.algorithms._comm_hooks import default_hooks
    from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy

    torch.manual_seed(0)
    model = FullyShardedDataParallel(torch.nn.Linear(8, 4), device_id=torch.device("cpu"),
                                     sharding_strategy=ShardingStrategy.FULL_SHARD)
    model.register_comm_hook(default_hooks.DefaultState(dist.group.WORLD), tt.comm_hook())
    model(torch.randn(16, 8)).pow(2).mean().backward()


def pipeline() -> None:
    """Two stages: 0 -> 1 and 2 -> 3 forward an activation, the gradient comes back."""
    stage, partner = RANK % 2, RANK ^ 1
    act = torch.zeros(4, 4)
    if stage == 0:
        dist.send(torch.randn(4, 4), partner)
        dist.recv(act, partner)
    else:
        dist.recv(act, partner)
        dist.send(act * 2, partner)


def main() -> None:
    handle = configure(service_name="rank-test", export_path=OUT / f"spans-{RANK}.jsonl", batch=False)
    dist.init_process_group("gloo")
    honest = dist.new_group(list(SUBGROUP))  # every rank creates it; the liar (rank 3) is not a member
    result: dict[str, object] = {"rank": RANK}
    pre = dist.P2POp(dist.isend, torch.full((4,), float(RANK)), (RANK + 1) % WORLD)

    check = tt.check_clocks(rounds=6)
    result["suspects"] = list(check.suspects)
    result["verdicts"] = {r.rank: r.verdict for r in check.ranks}

    tt.instrument(carriage="step+p2p")
    t = torch.ones(4)
    with tt.step(0):
        every_op(t)
        batch_with(pre)
        batch_with(None)
    with tt.step(1):
        ddp_step()
        fsdp_step()
    with tt.step(2):
        pipeline()
        if RANK in SUBGROUP:  # carriage "step+p2p": the op span records no merge
            dist.all_reduce(torch.ones(4), group=honest)
    tt.instrument(carriage="op")
    during = dist.P2POp(dist.isend, torch.full((4,), float(RANK)), (RANK + 1) % WORLD)
    with tt.step(3):
        dist.all_reduce(t.clone())
        if RANK == CORRUPT_RANK:
            records.corrupt_outgoing = lambda rec: rec[:50] + bytes([rec[50] ^ 0xFF]) + rec[51:]
        dist.all_reduce(t.clone())
        records.corrupt_outgoing = None
        dist.all_reduce(t.clone(), async_op=True).wait()
    with tt.step(4):
        if RANK in SUBGROUP:  # carriage "op": every op span merges the others' records
            dist.all_reduce(t.clone(), group=honest)
            dist.barrier(group=honest)
    tt.uninstrument()
    result["restored"] = {
        name: getattr(dist, name) is getattr(c10d, name) for name in ("all_reduce", "isend", "irecv", "send",
                                                                       "batch_isend_irecv", "barrier")
    }
    result["p2pop_restored"] = "__tempotrace_original__" not in vars(c10d.P2POp.__dict__["__init__"])
    result["wait_restored"] = not hasattr(c10d.Work.__dict__["wait"], "__tempotrace_original__")
    batch_with(during)  # a P2POp built while instrumented still works after uninstrument()
    result["counts"] = tt.carriage_counts()
    dist.barrier()
    dist.destroy_process_group()
    handle.shutdown()
    (OUT / f"result-{RANK}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
