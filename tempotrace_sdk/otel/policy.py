"""Application Confidence Policy: per-tenant timestamp contracts (spec/policy.md).

A TOML file maps tenant ids (0..15, the tt-ext tenant nibble) to a contract::

    [tenants.1]
    name = "llm-inference"
    ts_sources = ["GTE"]
    max_uncertainty_ns = 220
    clk_qualities = ["OK"]
    on_violation = "suspend_alerting"   # flag | suspend_alerting | degrade
    retention_days = 30
    tier = "tier-1"

The processor checks every span's timestamps against the LOCAL tenant's
contract only: a remote peer chooses its own tenant nibble and must not be
able to choose which rules our spans are judged by.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import Any

from .._bounded import InputRefused, read_regular_file
from ..clocks.base import Timestamp
from ..errors import PolicyError
from ..wire.layout import TENANT_MAX, UNCERTAINTY_SATURATED, ClockQuality, TsSource

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

__all__ = ["ON_VIOLATION", "Contract", "Policy", "load_policy"]

#: The largest policy file read: 16 tenant tables of a few lines each are
#: ~2 KB; 1 MiB leaves room for comments and keeps a wrong path (a log file,
#: /dev/zero) from costing seconds and hundreds of MB (spec/policy.md §2).
MAX_POLICY_BYTES = 1 << 20

#: What a contract may ask for when a span breaks it.
ON_VIOLATION = ("flag", "suspend_alerting", "degrade")
PASS = "pass"

_FIELDS = {
    "name",
    "ts_sources",
    "max_uncertainty_ns",
    "clk_qualities",
    "on_violation",
    "retention_days",
    "tier",
}


@dataclass(frozen=True)
class Contract:
    """One tenant's promise about its timestamps, and what to do when it is broken."""

    tenant_id: int
    name: str = ""
    ts_sources: frozenset[TsSource] = frozenset(TsSource)
    max_uncertainty_ns: int = UNCERTAINTY_SATURATED
    clk_qualities: frozenset[ClockQuality] = frozenset(ClockQuality)
    on_violation: str = "flag"
    retention_days: int | None = None
    tier: str = ""

    def reasons(self, ts: Timestamp) -> list[str]:
        """Every rule ``ts`` breaks, in words (empty when it keeps the contract)."""
        broken = []
        if ts.ts_source not in self.ts_sources:
            allowed = "|".join(sorted(s.name for s in self.ts_sources))
            broken.append(f"ts_source {TsSource(ts.ts_source).name} not in {allowed}")
        if ts.clk_quality not in self.clk_qualities:
            allowed = "|".join(sorted(q.name for q in self.clk_qualities))
            broken.append(f"clk_quality {ClockQuality(ts.clk_quality).name} not in {allowed}")
        if ts.uncertainty_ns > self.max_uncertainty_ns:
            broken.append(f"uncertainty_ns {ts.uncertainty_ns} > {self.max_uncertainty_ns}")
        return broken

    def verdict(self, ts: Timestamp) -> tuple[str, str]:
        """("pass", "") or (on_violation, "; ".join(reasons))."""
        broken = self.reasons(ts)
        return (self.on_violation, "; ".join(broken)) if broken else (PASS, "")


@dataclass(frozen=True)
class Policy:
    """Contracts by tenant id, and the file they came from."""

    contracts: dict[int, Contract]
    origin: str = "<policy>"

    def contract_for(self, tenant_id: int) -> Contract | None:
        return self.contracts.get(tenant_id)

    @classmethod
    def loads(cls, text: str, origin: str = "<policy>") -> Policy:
        """Parse TOML text; PolicyError names the line and the field on any mistake."""
        if len(text) > MAX_POLICY_BYTES:
            raise _error(origin, None, "<file>", f"{len(text)} characters, over the limit of {MAX_POLICY_BYTES}")
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            line = getattr(err, "lineno", None) or _line_from_message(str(err))
            raise _error(origin, line, "<toml>", f"not valid TOML: {err}") from err
        except RecursionError:  # arrays or inline tables nested hundreds deep
            raise _error(origin, None, "<toml>", "values nested too deep (a policy nests at most 2 levels)") from None
        except ValueError as err:  # tomllib's int() on an integer of more than 4,300 digits
            why = str(err).split(";")[0]  # not the advice to raise Python's digit limit
            line = next((n for n, t in enumerate(text.splitlines(), 1) if _HUGE_NUMBER.search(t)), None)
            raise _error(origin, line, "<toml>", f"a value TOML cannot hold: {why}") from None
        unknown = sorted(set(data) - {"tenants", "version"})
        if unknown:
            raise _error(origin, _find_line(text, None, unknown[0]), unknown[0], "unknown top-level key")
        version = data.get("version", 1)
        if not isinstance(version, int) or isinstance(version, bool) or version != 1:
            raise _error(origin, _find_line(text, None, "version"), "version", "must be the integer 1")
        tenants = data.get("tenants", {})
        if not isinstance(tenants, dict):
            raise _error(origin, _find_line(text, None, "tenants"), "tenants", "must be a table of [tenants.N]")
        contracts: dict[int, Contract] = {}
        for key, body in tenants.items():
            contract = _contract(text, origin, key, body)
            contracts[contract.tenant_id] = contract
        return cls(contracts, origin)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Policy:
        """Read and parse a policy file: a regular file of at most ``MAX_POLICY_BYTES`` (a FIFO is refused)."""
        try:
            raw = read_regular_file(path, MAX_POLICY_BYTES)
        except InputRefused as err:
            raise _error(str(path), None, "<file>", f"cannot read policy file: {err.rule}") from None
        except OSError as err:
            raise PolicyError(f"{path}: cannot read policy file: {err.strerror or err}") from err
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise _error(str(path), None, "<file>", f"cannot read policy file: not UTF-8 ({err.reason})") from None
        return cls.loads(text, str(path))


def load_policy(path: str | os.PathLike[str]) -> Policy:
    """Read a policy file (see module doc); raises PolicyError."""
    return Policy.load(path)


_HUGE_NUMBER = re.compile(r"\d{4300}")
_TENANT_KEY = re.compile(r"0|[1-9][0-9]?")


def _contract(text: str, origin: str, key: str, body: Any) -> Contract:
    where = f"tenants.{key}"
    header_line = _find_line(text, key, None)
    # Canonical decimal only: "01" and "1" would both be tenant 1, and the later
    # table would silently replace the earlier contract (spec/policy.md §1).
    if not _TENANT_KEY.fullmatch(key) or int(key) > TENANT_MAX:
        raise _error(
            origin, header_line, where, f"tenant id must be a decimal integer 0..{TENANT_MAX} without leading zeros"
        )
    if not isinstance(body, dict):
        raise _error(origin, header_line, where, "must be a table")
    for field in body:
        if field not in _FIELDS:
            raise _error(origin, _find_line(text, key, field), f"{where}.{field}", "unknown field")

    def fail(field: str, rule: str) -> PolicyError:
        return _error(origin, _find_line(text, key, field), f"{where}.{field}", rule)

    def names(field: str, enum_type: type[TsSource] | type[ClockQuality]) -> frozenset[Any]:
        raw = body.get(field)
        if raw is None:
            return frozenset(enum_type)
        valid = "|".join(m.name for m in enum_type)
        if not isinstance(raw, list) or not raw or not all(isinstance(v, str) for v in raw):
            raise fail(field, f"must be a non-empty list of {valid}")
        for v in raw:
            if v not in enum_type.__members__:
                raise fail(field, f"unknown value {v!r}; valid: {valid}")
        return frozenset(enum_type[v] for v in raw)

    def integer(field: str, low: int, high: int) -> int | None:
        raw = body.get(field)
        if raw is None:
            return None
        if not isinstance(raw, int) or isinstance(raw, bool) or not low <= raw <= high:
            raise fail(field, f"must be an integer {low}..{high}")
        return raw

    def string(field: str) -> str:
        raw = body.get(field, "")
        if not isinstance(raw, str):
            raise fail(field, "must be a string")
        return raw

    on_violation = body.get("on_violation", "flag")
    if on_violation not in ON_VIOLATION:
        raise fail("on_violation", f"must be one of {' | '.join(ON_VIOLATION)}")
    max_u = integer("max_uncertainty_ns", 0, UNCERTAINTY_SATURATED)
    return Contract(
        tenant_id=int(key),
        name=string("name"),
        ts_sources=names("ts_sources", TsSource),
        max_uncertainty_ns=UNCERTAINTY_SATURATED if max_u is None else max_u,
        clk_qualities=names("clk_qualities", ClockQuality),
        on_violation=on_violation,
        retention_days=integer("retention_days", 1, 36500),
        tier=string("tier"),
    )


def _error(origin: str, line: int | None, field: str, rule: str) -> PolicyError:
    where = f"{origin}:{line}" if line else origin
    err = PolicyError(f"{where}: {field}: {rule}")
    err.line = line  # type: ignore[attr-defined]
    err.field = field  # type: ignore[attr-defined]
    return err


def _line_from_message(message: str) -> int | None:
    match = re.search(r"line (\d+)", message)
    return int(match.group(1)) if match else None


_TABLE = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]\s*(?:#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-\"'.]+)\s*=")


def _find_line(text: str, tenant: str | None, field: str | None) -> int | None:
    """The 1-based line of ``field`` in ``[tenants.<tenant>]`` (or of that header).

    tomllib does not report positions of values it parsed fine, so we find
    them again in the text; it covers the ``[tenants.N]`` style this format
    documents.
    """
    table: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        m = _TABLE.match(line)
        if m:
            table = m.group(1).replace('"', "").replace("'", "").replace(" ", "")
            if tenant is not None and field is None and table == f"tenants.{tenant}":
                return number
            continue
        k = _KEY.match(line)
        if k is None or field is None:
            continue
        key = k.group(1).strip("\"'")
        in_table = table == f"tenants.{tenant}" if tenant is not None else table is None
        if in_table and key == field:
            return number
    return None
