"""``comm_hook()``: a span per gradient bucket reduced by DDP's (or FSDP1's) communication hook.

DDP reduces gradient buckets inside its C++ reducer, out of reach of the
wrapped ``torch.distributed`` functions, unless a communication hook does the
reduction in Python. ``comm_hook(inner)`` wraps such a hook: each call gets a
span (``torch.ddp.bucket``) whose parent is the span current on the calling
thread, or else the open ``step()``'s span (the reducer may run on autograd's
threads, where our context is not current); the ``inner`` hook's own
collectives (traced when ``instrument()`` is on) are its children; the span
ends, with its end stamp, when the bucket's future completes
(``completion="future"``). A bucket on a GPU has a future that completes
when its reduction is *queued* on the device (spec/torch.md §1.3): its span
then says ``completion="queued"``, and its end stamp is no completion.

The hook hands DDP ``inner``'s own future and lets ``inner``'s exceptions out
with ``inner``'s traceback: a job that fails fails as it does with ``inner``
registered alone (spec/torch.md §1.5).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.distributed as dist
from opentelemetry import context as context_api
from opentelemetry import trace
from torch._C._distributed_c10d import GradBucket

from ..semconv import TORCH_BUCKET, TORCH_BYTES, TORCH_COMPLETION, TORCH_OP
from .counts import count
from .groups import group_info
from .spans import callback_context, end_span, start_or_invalid
from .wrappers import hide_our_frames

__all__ = ["comm_hook"]


def _group_attrs(state: Any) -> dict[str, Any]:
    pg = state if isinstance(state, dist.ProcessGroup) else getattr(state, "process_group", None)
    try:
        return dict(group_info(pg).attributes)
    except Exception:  # a state we cannot read a group from: the span still says what it reduced
        return {}


def comm_hook(inner: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """A hook for ``DistributedDataParallel.register_comm_hook`` (or FSDP1's) that traces ``inner``.

    ``inner`` defaults to DDP's ``allreduce_hook`` (for FSDP1: its
    ``allreduce_hook`` or, when FSDP passes an output, ``reduce_scatter_hook``).
    Register it with the state ``inner`` expects: ``ddp.register_comm_hook(None, comm_hook())``.
    """

    def hook(state: Any, bucket: Any, output: Any = None) -> Any:
        is_ddp = isinstance(bucket, GradBucket)
        attrs = _group_attrs(state)
        attrs[TORCH_OP] = "ddp_bucket" if is_ddp else "fsdp_grad"
        data = bucket.buffer() if is_ddp else bucket
        if is_ddp:
            attrs[TORCH_BUCKET] = bucket.index()
        attrs[TORCH_BYTES] = int(data.nbytes)
        ended = "queued" if _on_device(data) else None
        name = "torch.ddp.bucket" if is_ddp else "torch.fsdp.grad"
        sp = start_or_invalid(name, attrs, callback_context())  # INVALID_SPAN on failure: inner reduces anyway
        token = context_api.attach(trace.set_span_in_context(sp))
        try:
            if is_ddp:
                result = (inner or _ddp_default())(state, bucket)
            elif output is None:
                result = (inner or _fsdp_default("allreduce_hook"))(state, bucket)
            else:
                result = (inner or _fsdp_default("reduce_scatter_hook"))(state, bucket, output)
        except BaseException as err:
            end_span(sp, {TORCH_COMPLETION: "error"}, error=err)
            hide_our_frames(err)  # inner's error, with the traceback inner registered alone gives (hide_our_frames)
            raise
        finally:
            context_api.detach(token)
        if not is_ddp or result is None:  # FSDP hooks reduce in place and return nothing
            end_span(sp, {TORCH_COMPLETION: ended or "return"})
            return result
        _end_when_done(result, sp, ended or "future")
        return result  # inner's own future: DDP sees its value, or its error, exactly as without us

    # DDP checks the hook's annotations against its own objects (a "bucket"
    # parameter annotated GradBucket, or not at all); ours are strings here.
    hook.__annotations__ = {}
    return hook


def _end_when_done(fut: Any, sp: Any, completion: str) -> None:
    """End the bucket's span once its future completes, without chaining a future of ours: a ``then()``
    callback's error reaches DDP wrapped ("Got the following error when running the callback", with our
    frame in it), so the span ends from ``add_done_callback`` and DDP keeps inner's future. Torch runs the
    callback on the thread that completes the future, once its waiters are woken: the end stamp may come
    just after DDP went on. Never raises."""

    def bucket_done(done: Any) -> None:
        try:
            done.value()  # the reduction's error, if it failed: the span ends with it
        except BaseException as err:
            end_span(sp, {TORCH_COMPLETION: "error"}, error=err)
            return
        end_span(sp, {TORCH_COMPLETION: completion})

    try:
        fut.add_done_callback(bucket_done)
    except Exception:  # not a torch future: the span ends now, the program gets what inner returned
        count("completion_hook_failed")
        end_span(sp, {TORCH_COMPLETION: "return"})


def _on_device(tensor: Any) -> bool:
    device = getattr(tensor, "device", None)
    return device is not None and device.type != "cpu"


def _ddp_default() -> Callable[..., Any]:
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    return allreduce_hook


def _fsdp_default(name: str) -> Callable[..., Any]:
    from torch.distributed.algorithms._comm_hooks import default_hooks

    hook: Callable[..., Any] = getattr(default_hooks, name)
    return hook
