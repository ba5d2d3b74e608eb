"""What ``trace_compute()`` costs: a training iteration with and without its three spans, in one process.

    python benchmarks/bench_torch_compute.py [--json] [--quick]

An iteration is forward, backward and ``optimizer.step()`` of a small MLP on
the CPU, inside one open ``step()`` (its span is the parent of the compute
spans, as in training; its own cost is outside the timing). The traced model
and an identical untraced one are timed in alternating batches
(``harness.compare``), so load on a shared machine moves both sides together;
the table gives the per-iteration medians, their ratio, and what tracing adds
per hooked call (three per iteration: forward, backward, optimizer.step).

Peers, measured in the same run: a bare OpenTelemetry SDK span (a provider
with no processor: start and end) is the unit every per-call cost is divided
by; "hooks that do nothing" registers the same torch hooks (forward pre/post,
the output's gradient hook, the backward-end callback, the optimizer's
pre/post) with empty bodies, which is what torch charges for calling them; an
op span through our pipeline (``spans.start_or_invalid`` + ``end_span``, what
a torch.distributed op's span costs when it is not held) is what each
compute span is made of. Spans are exported to a JSON-lines file in a
temporary folder, as a user's would be (``configure()``, batch export).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from opentelemetry.sdk.trace import TracerProvider

from benchmarks.harness import Row, as_json, compare, measure, print_table
from tempotrace_sdk import torch as tt
from tempotrace_sdk.otel import configure
from tempotrace_sdk.torch import spans

#: (name, layer widths, batch): the tiny model shows tracing's cost nearly alone; the wider one is still a
#: small model (3 MiB of parameters), whose iteration is a few milliseconds on one CPU core.
MODELS = (("MLP 32-64-1, batch 16", (32, 64, 1), 16), ("MLP 512-1024-512, batch 64", (512, 1024, 512), 64))
#: Hooked calls per iteration: forward, backward, optimizer.step.
HOOKED = 3


def _model(widths: tuple[int, ...]) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for a, b in itertools.pairwise(widths):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    return model, torch.optim.SGD(model.parameters(), lr=1e-3)


def _iteration(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor) -> Callable[[], None]:
    def run() -> None:
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    return run


def _empty_hooks(model: torch.nn.Module, opt: torch.optim.Optimizer) -> None:
    """The hooks trace_compute registers, doing nothing: torch's cost of calling them."""
    engine = torch.autograd.Variable._execution_engine

    def on_output(module: Any, args: Any, output: Any) -> None:
        output.register_hook(lambda grad: engine.queue_callback(lambda: None))

    model.register_forward_pre_hook(lambda module, args: None)
    model.register_forward_hook(on_output, always_call=True)
    opt.register_step_pre_hook(lambda o, args, kwargs: None)
    opt.register_step_post_hook(lambda o, args, kwargs: None)


def rows(quick: bool) -> list[Row]:
    min_time, repeat = (0.3, 9) if quick else (1.5, 25)
    bare_tracer = TracerProvider().get_tracer("bench")
    bare = measure(lambda: bare_tracer.start_span("op").end(), min_time=min_time)

    def op_span() -> None:
        spans.end_span(spans.start_or_invalid("torch.op", {"tempotrace.torch.op": "bench"}))

    ours = measure(op_span, min_time=min_time)
    out = [Row("bare SDK span (start+end)", bare),
           Row("op span through our pipeline", ours, "bare SDK span", ours / bare)]
    for k, (name, widths, batch) in enumerate(MODELS):
        x = torch.randn(batch, widths[0])
        plain_model, plain_opt = _model(widths)
        hooked_model, hooked_opt = _model(widths)
        _empty_hooks(hooked_model, hooked_opt)
        traced_model, traced_opt = _model(widths)
        handle = tt.trace_compute(traced_model, traced_opt)
        plain = _iteration(plain_model, plain_opt, x)
        with tt.step():  # the compute spans' parent, as in training
            hooked_ns, plain_ns, hooked_ratio = compare(_iteration(hooked_model, hooked_opt, x), plain,
                                                        min_time=min_time, repeat=repeat)
            traced_ns, plain_ns, traced_ratio = compare(_iteration(traced_model, traced_opt, x), plain,
                                                        min_time=min_time, repeat=repeat)
        handle.remove()
        out += [Row(f"{name}: plain iteration", plain_ns),
                Row(f"{name}: traced iteration", traced_ns, "plain iteration", traced_ratio),
                Row(f"{name}: hooks that do nothing", hooked_ns, "plain iteration", hooked_ratio)]
        if k == 0:  # tracing is most of what differs here; in a bigger iteration it drowns in the noise
            # from the median per-pair ratio, steadier than a difference of two medians (harness.compare)
            per_call, hooks_per_call = ((r - 1) * plain_ns / HOOKED for r in (traced_ratio, hooked_ratio))
            out += [Row(f"{name}: added per hooked call", per_call, "bare SDK span", per_call / bare),
                    Row(f"{name}: of which torch's hook calls", hooks_per_call, "bare SDK span",
                        hooks_per_call / bare)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true", help="shorter timing (a rough look)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # one core per rank, as a data-parallel job runs
    with tempfile.TemporaryDirectory(prefix="tt-bench-compute-") as tmp:
        handle = configure(service_name="bench-torch-compute", export_path=Path(tmp) / "spans.jsonl")
        try:
            table = rows(args.quick)
        finally:
            handle.shutdown()
    title = "trace_compute: forward / backward / optimizer.step spans (one process, CPU, 1 thread)"
    if args.json:
        import json

        print(json.dumps(as_json(title, table), indent=2))
    else:
        print_table(title, table)


if __name__ == "__main__":
    main()
