"""Rack topology: the extra error physics must allow between racks (spec/analysis.md §3).

The paper's MRSH/TADC idea: clocks within a rack share a boundary clock, so
their claimed bounds are comparable; across racks the path between the racks'
time sources adds an error that neither stamp's bound includes. The topology
file says, per rack pair, how much; physics widens the gap it needs by that.

File format (JSON)::

    {"racks": {"host-a": "r1", "host-b": "r2"},
     "rack_pairs": [{"racks": ["r1", "r2"], "extra_ns": 120}],
     "default_cross_rack_ns": 50}

A pair of different racks not listed gets ``default_cross_rack_ns`` (0 when
absent). A host not in ``racks`` is unknown: any pair involving it gets the
largest extra in the file, so a missing entry can only make physics more
careful, never wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import TempoTraceError

__all__ = ["Topology", "TopologyError", "load_topology"]


class TopologyError(TempoTraceError, ValueError):
    """The topology file breaks a rule of spec/analysis.md §3; ``field`` names where."""

    def __init__(self, path: str, field_name: str, rule: str) -> None:
        self.path = path
        self.field = field_name
        self.rule = rule
        super().__init__(f"{path}: {field_name}: {rule}")


@dataclass(frozen=True)
class Topology:
    """Host -> rack map and the rack-pair extra error table (ns)."""

    racks: dict[str, str] = field(default_factory=dict)
    pairs: dict[frozenset[str], int] = field(default_factory=dict)
    default_cross_rack_ns: int = 0

    @property
    def worst_ns(self) -> int:
        return max([self.default_cross_rack_ns, *self.pairs.values()])

    def extra_ns(self, host_a: str, host_b: str) -> int:
        """Extra error to allow between stamps of these two hosts."""
        if host_a == host_b:
            return 0
        ra, rb = self.racks.get(host_a), self.racks.get(host_b)
        if ra is None or rb is None:
            return self.worst_ns
        if ra == rb:
            return 0
        return self.pairs.get(frozenset((ra, rb)), self.default_cross_rack_ns)

    def to_dict(self) -> dict[str, Any]:
        return {
            "racks": dict(self.racks),
            "rack_pairs": [{"racks": sorted(k), "extra_ns": v} for k, v in sorted(self.pairs.items(), key=str)],
            "default_cross_rack_ns": self.default_cross_rack_ns,
        }


def _nonneg_int(path: str, where: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TopologyError(path, where, f"must be a non-negative integer (ns), got {value!r}")
    return value


def parse_topology(doc: object, path: str = "<topology>") -> Topology:
    """Validate a decoded topology document."""
    if not isinstance(doc, dict):
        raise TopologyError(path, "<top>", "must be a JSON object")
    unknown = set(doc) - {"racks", "rack_pairs", "default_cross_rack_ns"}
    if unknown:
        raise TopologyError(path, sorted(unknown)[0], "unknown key (allowed: racks, rack_pairs, default_cross_rack_ns)")
    racks = doc.get("racks", {})
    if not isinstance(racks, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in racks.items()):
        raise TopologyError(path, "racks", "must map host names to rack names (strings)")
    pairs: dict[frozenset[str], int] = {}
    raw_pairs = doc.get("rack_pairs", [])
    if not isinstance(raw_pairs, list):
        raise TopologyError(path, "rack_pairs", "must be a list")
    for i, item in enumerate(raw_pairs):
        where = f"rack_pairs[{i}]"
        if not isinstance(item, dict):
            raise TopologyError(path, where, "must be an object with racks and extra_ns")
        names = item.get("racks")
        if not (isinstance(names, list) and len(names) == 2 and all(isinstance(n, str) for n in names)):
            raise TopologyError(path, where + ".racks", "must be a list of two rack names")
        if names[0] == names[1]:
            raise TopologyError(path, where + ".racks", "a rack pair needs two different racks")
        key = frozenset(names)
        if key in pairs:
            raise TopologyError(path, where + ".racks", f"pair {names} listed twice")
        pairs[key] = _nonneg_int(path, where + ".extra_ns", item.get("extra_ns"))
    default = _nonneg_int(path, "default_cross_rack_ns", doc.get("default_cross_rack_ns", 0))
    return Topology(dict(racks), pairs, default)


def load_topology(path: str) -> Topology:
    """Read and validate a topology file (raises TopologyError)."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except OSError as err:
        raise TopologyError(path, "<file>", f"cannot read: {err.strerror or err}") from err
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise TopologyError(path, "<file>", f"not JSON: {err}") from err
    return parse_topology(doc, path)
