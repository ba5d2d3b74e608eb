"""Trace torch.distributed: collectives and point-to-point ops carry tt-ext (spec/torch.md).

Install with the ``[torch]`` extra. In each rank of a ``torchrun`` job::

    from tempotrace_sdk.otel import configure
    from tempotrace_sdk import torch as tt

    configure(service_name="trainer")      # knows RANK / WORLD_SIZE / the job from torchrun
    dist.init_process_group("gloo")
    tt.check_clocks()                      # every rank against rank 0: warns and trains on;
                                           # require="DEGRADED" gates (exit 1, saying why and what to do)
    tt.instrument()                        # one span per collective / p2p op per rank;
                                           # retain="ring": a flight recorder, dumped on hangs (tt.dump())
    model.register_comm_hook(None, tt.comm_hook())   # DDP gradient buckets
    tt.trace_compute(model, optimizer)     # optional: forward / backward / optimizer.step spans
    for epoch in range(epochs):
        for batch in loader:
            with tt.step():                # counts steps itself: one trace id per step on every rank
                train(batch)

Names are loaded on first use, so ``import tempotrace_sdk.torch`` does not
import torch. The launch environment (``launch_facts``) is read by
``tempotrace_sdk.launch``, outside this package: ``configure()`` reads it
where torch is not installed.

Where things are: an op is wrapped by ``install`` and runs in ``wrappers``
(collectives) or ``p2p``; ``recorder`` records a blocking collective and
``opspans`` turns records into spans; ``steps``, ``compute``, ``ddp``,
``clockcheck`` and ``dumps`` are the other entry points. Carrying tt-ext
records between ranks is ``carriage/``; the byte formats it carries, the
95-octet record and the group keys and step ids, are ``wire.torchrecord`` and
``wire.torchkeys``; the op table is ``tempotrace_sdk.torchops``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

_LAZY = {
    "instrument": ".install",
    "uninstrument": ".install",
    "is_instrumented": ".install",
    "carriage_mode": ".install",
    "sweep": ".install",
    "dump": ".dumps",
    "step": ".steps",
    "current_step": ".spans",
    "comm_hook": ".ddp",
    "trace_compute": ".compute",
    "ComputeTracing": ".compute",
    "check_clocks": ".clockcheck",
    "ClockCheck": ".clockcheck",
    "RankClock": ".clockcheck",
    "carriage_counts": ".counts",
    "TorchRecord": "..wire.torchrecord",
    "RecordKind": "..wire.torchrecord",
    "RecordError": "..wire.torchrecord",
    "encode_record": "..wire.torchrecord",
    "decode_record": "..wire.torchrecord",
    "RECORD_LEN": "..wire.torchrecord",
    "LaunchFacts": "..launch",
    "launch_facts": "..launch",
    "group_key": "..wire.torchkeys",
    "step_ids": "..wire.torchkeys",
}

if TYPE_CHECKING:
    from ..launch import LaunchFacts, launch_facts
    from ..wire.torchkeys import group_key, step_ids
    from ..wire.torchrecord import RECORD_LEN, RecordError, RecordKind, TorchRecord, decode_record, encode_record
    from .clockcheck import ClockCheck, RankClock, check_clocks
    from .compute import ComputeTracing, trace_compute
    from .counts import carriage_counts
    from .ddp import comm_hook
    from .dumps import dump
    from .install import carriage_mode, instrument, is_instrumented, sweep, uninstrument
    from .spans import current_step
    from .steps import step

__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)

__all__ = [
    "RECORD_LEN",
    "ClockCheck",
    "ComputeTracing",
    "LaunchFacts",
    "RankClock",
    "RecordError",
    "RecordKind",
    "TorchRecord",
    "carriage_counts",
    "carriage_mode",
    "check_clocks",
    "comm_hook",
    "current_step",
    "decode_record",
    "dump",
    "encode_record",
    "group_key",
    "instrument",
    "is_instrumented",
    "launch_facts",
    "step",
    "step_ids",
    "sweep",
    "trace_compute",
    "uninstrument",
]
