"""The machinery of the value rules (values.py holds the rules themselves): ``Rule``, what one attribute
must hold, and ``Schema``, a table of rules compiled into the readers every path uses.

``Schema.read_otlp`` is the hottest code of the analysis (every attribute of
every span). It is generated from the table when the schema is built, the way
dataclasses generates ``__init__``: one loop routes each known attribute to its
slot, then straight-line code checks each slot with its rule's constants
inlined. So the table stays the one place a rule is written, and checking
costs no per-attribute dispatch.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from ..errors import TempoTraceError

__all__ = [
    "BOOL", "HEX", "INT", "INT64_MAX", "INT_ARRAY", "MAX_NAME", "STRING", "AttributeRuleError", "Rule", "Schema",
]

INT64_MAX = 2**63 - 1
#: Longest string the analysis keeps from a name attribute (a host, a clock): longer is not a name.
MAX_NAME = 1024

INT = "int"
STRING = "string"
HEX = "hex"  # a string of hex digits, read as an int
INT_ARRAY = "int[]"
BOOL = "bool"


class AttributeRuleError(TempoTraceError, ValueError):
    """A span's attribute (or OTLP field) breaks a value rule; ``field`` names it, ``rule`` says what."""

    def __init__(self, field: str, rule: str, value: object) -> None:
        self.field = field
        self.rule = rule
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        super().__init__(f"attribute {field} must be {rule}, got {shown}")


class Rule(msgspec.Struct, frozen=True, gc=False):
    """What one attribute must hold: ``kind`` (int, string, hex, int[] or bool), an integer range (ints and
    the elements of int arrays), the allowed strings, a count of hex digits, a longest string (``max_chars``,
    0 for free text), or a shape (``pattern``, a regular expression the whole string matches, with ``shape``
    its name in words). ``read``: the record uses it (else it is only checked)."""

    kind: str
    lo: int = 0
    hi: int = INT64_MAX
    choices: frozenset[str] | None = None
    digits: int = 0
    max_chars: int = MAX_NAME
    read: bool = True
    pattern: str | None = None
    shape: str = ""

    def describe(self) -> str:
        if self.kind == BOOL:
            return "a boolean"
        if self.kind == STRING:
            if self.choices is not None:
                return "one of " + "/".join(sorted(self.choices))
            if self.pattern is not None:
                return f"{self.shape} (at most {self.max_chars:,} characters)"
            return f"a string of at most {self.max_chars:,} characters" if self.max_chars else "a string"
        if self.kind == HEX:
            return f"{self.digits} hex digits"
        what = "an integer" if self.kind == INT else "an array of integers"
        return f"{what} {self.lo}..{self.hi}"

    def check(self, name: str, value: object) -> Any:
        """The value to keep (a hex string as its int) when ``value`` (plain Python) keeps the rule."""
        kind = self.kind
        if kind == INT:
            if isinstance(value, int) and value.__class__ is int and self.lo <= value <= self.hi:
                return value  # bool is no integer here
        elif kind == STRING:
            if isinstance(value, str) and (value in self.choices if self.choices is not None
                                           else not self.max_chars or len(value) <= self.max_chars) and (
                    self.pattern is None or re.fullmatch(self.pattern, value) is not None):
                return value
        elif kind == BOOL:
            if value is True or value is False:
                return value
        elif kind == HEX:
            if isinstance(value, str) and len(value) == self.digits:
                try:
                    return int.from_bytes(bytes.fromhex(value), "big")
                except ValueError:
                    pass
        elif isinstance(value, (list, tuple)) and all(v.__class__ is int and self.lo <= v <= self.hi for v in value):
            return list(value)
        raise AttributeRuleError(name, self.describe(), value)

    def unwrap(self, name: str, any_value: Any) -> Any:
        """The checked value of an OTLP AnyValue (otlp.AnyValue) for this rule."""
        kind = self.kind
        if kind == INT:
            value = any_value.intValue
        elif kind == INT_ARRAY:
            array = any_value.arrayValue
            value = None if array is None else [v.intValue for v in array.values]
        elif kind == BOOL:
            value = any_value.boolValue
        else:
            value = any_value.stringValue
        if value is None:
            raise AttributeRuleError(name, self.describe(), _shown(any_value))
        return self.check(name, value)


def _shown(any_value: Any) -> object:
    """An AnyValue as the writer wrote it, for an error message."""
    return {k: v for k, v in msgspec.structs.asdict(any_value).items() if v is not None}


class Schema:
    """A table of rules and the attributes its readers return, in order (``read``): ``read_otlp`` (OTLP
    KeyValues) and ``read_plain`` ((name, value) pairs) return one value per ``read`` name, None when
    absent, after checking every attribute the table knows; AttributeRuleError names a broken rule.

    ``rare``: names most spans never carry (e.g. the torch attributes). The generated reader gives them
    slots of their own, made and checked only for a span that has one of them, so they cost the other
    spans one failed lookup per attribute the table does not know. With rare names the readers return
    the common ``read`` values and then one more element: None when the span has no rare attribute, else
    the list of the rare ``read`` values (in ``read`` order, where they come last)."""

    def __init__(self, rules: dict[str, Rule], read: tuple[str, ...], rare: frozenset[str] = frozenset()) -> None:
        unread = [name for name in read if name not in rules]
        assert not unread, f"read but not in the table: {unread}"
        assert all(rules[name].read for name in read) and all(name in read for name, r in rules.items() if r.read)
        common_read = [name for name in read if name not in rare]
        assert list(read) == common_read + [name for name in read if name in rare], "rare read names come last"
        self.rules = rules
        self.read = read
        # Slots: the common attributes (read first, in order, then the ones only checked), then the rare ones.
        self.common = (*common_read, *(name for name in rules if name not in read and name not in rare))
        self.rare = (*(name for name in read if name in rare), *(name for name in rules if name in rare
                                                                 and name not in read))
        self.names = (*self.common, *self.rare)
        self.slot = {name: i for i, name in enumerate(self.names)}
        self.read_otlp: Callable[[Iterable[Any]], list[Any]] = _compile(self)

    def read_plain(self, attributes: Iterable[tuple[str, Any]]) -> list[Any]:
        """The checked values from plain (name, value) pairs, e.g. an SDK span's attributes."""
        slots: list[Any] = [None] * len(self.names)
        for name, value in attributes:
            i = self.slot.get(name)
            if i is not None:
                slots[i] = self.rules[name].check(name, value)
        values = [slots[self.slot[name]] for name in self.read]
        if not self.rare:
            return values
        common = len(self.read) - sum(1 for name in self.read if name in self.rare)
        present = any(v is not None for v in slots[len(self.common):])
        return [*values[:common], values[common:] if present else None]


def _check_code(v: str, k: int, held: str, rule: Rule) -> list[str]:
    """The lines that turn ``v`` (an AnyValue, or None) into its checked value or raise; ``k`` is the
    attribute's index in Schema.names, ``held`` where the AnyValue still is (for the message)."""
    bad = f"raise bad({k}, {held})"
    if rule.kind == INT:
        return [f"{v} = {v}.intValue", f"if {v} is None or {v} < {rule.lo} or {v} > {rule.hi}: {bad}"]
    if rule.kind == STRING and rule.choices is not None:
        return [f"{v} = choices{k}.get({v}.stringValue)", f"if {v} is None: {bad}"]
    if rule.kind == STRING:
        limit = f" or len({v}) > {rule.max_chars}" if rule.max_chars else ""
        shape = f" or pattern{k}({v}) is None" if rule.pattern is not None else ""
        return [f"{v} = {v}.stringValue", f"if {v} is None{limit}{shape}: {bad}"]
    if rule.kind == BOOL:
        return [f"{v} = {v}.boolValue", f"if {v} is None: {bad}"]
    if rule.kind == HEX:
        return [f"{v} = {v}.stringValue",
                f"if {v} is None or len({v}) != {rule.digits}: {bad}",
                "try:", f"    {v} = int.from_bytes(fromhex({v}), 'big')  # whitespace would have made it shorter",
                f"except ValueError: {bad}"]
    return [f"{v} = {v}.arrayValue", f"if {v} is None: {bad}", f"{v} = [e.intValue for e in {v}.values]",
            f"if {v} and (None in {v} or min({v}) < {rule.lo} or max({v}) > {rule.hi}): {bad}"]


def _compile(schema: Schema) -> Callable[[Iterable[Any]], list[Any]]:
    names = schema.names
    rules = [schema.rules[name] for name in names]
    nc, nr = len(schema.common), len(schema.rare)
    read_rare = sum(1 for name in schema.read if name in schema.rare)
    read_common = len(schema.read) - read_rare
    body = [
        "def read_otlp(attributes):",
        f"    slots = [None] * {nc}",
        "    rare = None",
        "    for kv in attributes:",
        "        i = route(kv.key)",
        "        if i is not None:",
        "            slots[i] = kv.value",
    ]
    if nr:
        body += [
            "        else:",
            "            i = route_rare(kv.key)",
            "            if i is not None:",
            "                if rare is None:",
            f"                    rare = [None] * {nr}",
            "                rare[i] = kv.value",
        ]
    body.append(f"    {', '.join(f'v{i}' for i in range(nc))}, = slots")
    for i in range(nc):
        body.append(f"    if v{i} is not None:  # {names[i]}")
        body += [f"        {line}" for line in _check_code(f"v{i}", i, f"slots[{i}]", rules[i])]
    common = ", ".join(f"v{i}" for i in range(read_common))
    if nr:
        body += ["    if rare is None:", f"        return [{common}, None]",
                 f"    {', '.join(f'w{j}' for j in range(nr))}, = rare"]
        for j in range(nr):
            body.append(f"    if w{j} is not None:  # {names[nc + j]}")
            body += [f"        {line}" for line in _check_code(f"w{j}", nc + j, f"rare[{j}]", rules[nc + j])]
        body.append(f"    return [{common}, [{', '.join(f'w{j}' for j in range(read_rare))}]]")
    else:
        body.append(f"    return [{common}]")

    def bad(i: int, any_value: Any) -> AttributeRuleError:
        return AttributeRuleError(names[i], rules[i].describe(), _shown(any_value))

    namespace: dict[str, Any] = {"bad": bad, "fromhex": bytes.fromhex,
                                 "route": {name: i for i, name in enumerate(schema.common)}.get,
                                 "route_rare": {name: j for j, name in enumerate(schema.rare)}.get}
    for i, rule in enumerate(rules):
        if rule.choices is not None:
            namespace[f"choices{i}"] = {c: c for c in rule.choices}  # one str object per choice is kept
        if rule.pattern is not None:
            namespace[f"pattern{i}"] = re.compile(rule.pattern).fullmatch
    exec("\n".join(body), namespace)  # our own table's code, nothing from the input
    reader: Callable[[Iterable[Any]], list[Any]] = namespace["read_otlp"]
    reader.__doc__ = "The checked values of the known attributes among OTLP KeyValues (generated from the table)."
    return reader
