"""The wrapper each torch.distributed entry point gets, and which body runs it (spec/torch.md §1.1).

Its own module so that the collective bodies (wrappers.py) and the point-to-point
bodies (p2p.py, which builds on wrappers.py) need not import each other.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import torch.distributed as dist

from . import owed
from .carriage import count
from .groups import group_info
from .ops import Kind, OpSpec, Reader
from .owed import pay
from .p2p import receive, send
from .tracebacks import hide_our_frames
from .wrappers import ORIGINAL_ATTR, collective, inside, settings

__all__ = ["make_wrapper"]

_log = logging.getLogger(__name__)


def make_wrapper(spec: OpSpec, original: Callable[..., Any]) -> Callable[..., Any]:
    reader = Reader(original)
    body = {Kind.COLLECTIVE: collective, Kind.SEND: send, Kind.RECV: receive}[spec.kind]

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            if not settings.active or inside.get():
                return original(*args, **kwargs)
            if owed.due():
                pay()  # a step's exchange owed since its exception goes first, as it did on the other ranks (§4.2)
            group = reader.get(args, kwargs, "group")
            if group is dist.GroupMember.NON_GROUP_MEMBER:
                return original(*args, **kwargs)
            try:
                info = group_info(group)
            except Exception:  # not initialised, a group torch will refuse, ...: torch says what is wrong
                count("untraced")
                _log.debug("tempotrace.torch: %s not traced", spec.name, exc_info=True)
                return original(*args, **kwargs)
            return body(spec, reader, original, info, args, kwargs)
        except BaseException as err:
            hide_our_frames(err)  # torch's error, with the traceback the untraced call gives (tracebacks.py)
            raise

    setattr(wrapper, ORIGINAL_ATTR, original)
    return wrapper
