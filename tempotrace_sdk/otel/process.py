"""The per-process attributes: on the Resource where it carries them, else on each span (semantic-conventions §1.2).

The host, the clock's name and its domain, the local tenant -- and the tenant's policy
tier and retention, and under a launcher the rank, world size and job
(tempotrace_sdk/launch.py) -- are the same for every span a process stamps. Written
on each span they were a third of an exported demo span; on the Resource
they are written once per exported batch. ``configure()`` puts them on the
Resource of the provider it creates. A provider TempoTrace did not create
keeps the Resource it was made with (a Resource cannot change), so for its
spans the processor writes them on each span, as before: every span says
them one way or the other, and a query by the unscoped name (TraceQL
``.tempotrace.host``) finds either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opentelemetry.util import types

from ..semconv import (
    CLOCK,
    CLOCK_DOMAIN,
    CLOCK_EPOCH_BOUND_NS,
    CLOCK_EPOCH_NS,
    CLOCK_READ_NS,
    HOST,
    POLICY_RETENTION_DAYS,
    POLICY_TIER,
    TENANT_ID,
)

if TYPE_CHECKING:
    from opentelemetry.sdk.resources import Resource

    from .context import TempoTraceState

__all__ = ["ProcessAttributes", "process_attributes"]


def process_attributes(state: TempoTraceState) -> dict[str, types.AttributeValue]:
    """What every span of this process shares: host, clock, tenant, the tenant's tier and retention, and
    the launch facts."""
    attrs: dict[str, types.AttributeValue] = {HOST: state.host, CLOCK: state.clock.name, TENANT_ID: state.tenant}
    domain = state.domain  # the kernel clock's domain, as it was when the process started stamping
    if domain is not None:
        attrs[CLOCK_DOMAIN] = domain.key
        attrs[CLOCK_EPOCH_NS] = domain.start.mid_ns
        attrs[CLOCK_EPOCH_BOUND_NS] = domain.start.half_ns
        attrs[CLOCK_READ_NS] = domain.read_ns
    attrs.update(state.launch)  # under torchrun: rank, world size, job ... (semantic-conventions §9.1)
    contract = state.contract
    if contract is not None:
        if contract.tier:
            attrs[POLICY_TIER] = contract.tier
        if contract.retention_days is not None:
            attrs[POLICY_RETENTION_DAYS] = contract.retention_days
    return attrs


#: The domain's measured values: a Resource made by another TempoTrace state of this process (the zero-code
#: distro's, then configure()'s) measured the same epoch a few ns apart; it still says it.
_EPOCH = frozenset((CLOCK_EPOCH_NS, CLOCK_EPOCH_BOUND_NS, CLOCK_READ_NS))


def _same_epoch(carried: types.Attributes, attrs: dict[str, types.AttributeValue]) -> bool:
    """Does the Resource say this process's clock epoch (clocks/domain.py: both measurements meet)?"""
    if CLOCK_EPOCH_NS not in attrs:
        return not any(k in (carried or {}) for k in _EPOCH)
    try:
        theirs = int(carried[CLOCK_EPOCH_NS]), int(carried[CLOCK_EPOCH_BOUND_NS])  # type: ignore[index,arg-type]
        ours = int(attrs[CLOCK_EPOCH_NS]), int(attrs[CLOCK_EPOCH_BOUND_NS])  # type: ignore[arg-type]
        int(carried[CLOCK_READ_NS])  # type: ignore[index,arg-type]
    except (KeyError, TypeError, ValueError):
        return False
    return abs(theirs[0] - ours[0]) <= theirs[1] + ours[1]


class ProcessAttributes:
    """The per-process attributes a span must carry itself: none when its Resource has them all.

    Decided once per (Resource, state, configuration) and kept: spans of one
    provider share one Resource object, so the per-span cost is two identity
    checks and an int comparison.
    """

    __slots__ = ("cache",)

    #: (resource, state, version, needed) of the last answer, read inline by the processor.
    cache: tuple[object, object, int, dict[str, types.AttributeValue] | None]

    def __init__(self) -> None:
        # (resource, state, version, needed) in one tuple: one store, so another thread reads an
        # old answer or the new one, never a mix.
        self.cache = (None, None, -1, None)

    def for_span(self, state: TempoTraceState, resource: Resource | None) -> dict[str, types.AttributeValue] | None:
        cache = self.cache
        if cache[0] is resource and cache[1] is state and cache[2] == state.version:
            return cache[3]
        attrs = process_attributes(state)  # may resolve the clock or tenant (and bump the version)
        carried = resource.attributes if resource is not None else {}
        needed = None if all(carried.get(k) == v for k, v in attrs.items() if k not in _EPOCH) and \
            _same_epoch(carried, attrs) else attrs
        self.cache = (resource, state, state.version, needed)
        return needed
