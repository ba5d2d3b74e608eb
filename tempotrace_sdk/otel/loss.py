"""Spans an export pipeline lost: counted once, reported where the user looks (spec/reliability.md).

A ``LossLedger`` belongs to one export pipeline (a batch processor and its
exporter share it). Every span it could not deliver is counted three ways:

- in ``errors()`` (the handle's and the processor's error counts), under
  ``export_dropped`` and ``export_dropped_<reason>``;
- in a warning, at most once a minute per ledger (a full disk must not
  log one traceback per span);
- in the export file itself, when the exporter writes one: a drop record,
  an ordinary OTLP JSON line with no spans whose resource carries
  ``tempotrace.export.dropped_spans`` (cumulative, monotonic) and
  ``tempotrace.export.writer_id`` (unique to this ledger). A reader takes
  the largest count per writer id and sums over writers.

After ``fork()`` the child's ledger starts again from zero under a new
writer id: the parent's losses stay the parent's to report.
"""

from __future__ import annotations

import json
import logging
import math
import os
import secrets
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..semconv import EXPORT_DROPPED_SPANS, EXPORT_WRITER_ID

__all__ = [
    "DROPPED_SPANS_KEY",
    "DROP_RECORD_INTERVAL_S",
    "WARN_INTERVAL_S",
    "WRITER_ID_KEY",
    "LossLedger",
    "drop_record_line",
]

_log = logging.getLogger(__name__)

#: Resource attribute keys of the drop record (spec/semantic-conventions.md §10).
DROPPED_SPANS_KEY = EXPORT_DROPPED_SPANS
WRITER_ID_KEY = EXPORT_WRITER_ID

#: A drop record is written at most this often while spans are being
#: dropped (and always at flush and shutdown when the count changed): often
#: enough that a SIGKILLed process leaves a recent count, rarely enough that
#: a full disk is not asked for one more line per batch.
DROP_RECORD_INTERVAL_S = 10.0
#: At most one warning per ledger in this many seconds (the first is immediate).
WARN_INTERVAL_S = 60.0

CountError = Callable[[str, int], None]


def _default_count_error(where: str, n: int) -> None:
    from .context import get_state  # the process-wide counters behind errors()

    get_state().count_error(where, n)


class LossLedger:
    """The spans one export pipeline dropped, why, and when they were last reported."""

    def __init__(self, count_error: CountError | None = None, *, name: str = "tempotrace export") -> None:
        self._count_error = count_error or _default_count_error
        self.name = name
        self._lock = threading.Lock()
        self._renew()

    def _renew(self) -> None:
        self.writer_id = f"{socket.gethostname()}/{os.getpid()}/{secrets.token_hex(4)}"
        self.dropped = 0
        self.by_reason: Counter[str] = Counter()
        self._recorded = 0  # the count in the last drop record written
        self._recorded_at = -math.inf
        self._warned_at = -math.inf
        self._failures: Counter[str] = Counter()

    def after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
        self._renew()

    def drop(self, n: int, reason: str, detail: str = "") -> None:
        """Count ``n`` spans lost for ``reason`` (e.g. ``queue_full``, ``write_failed``)."""
        if n <= 0:
            return
        with self._lock:
            self.dropped += n
            self.by_reason[reason] += n
        self._count_error("export_dropped", n)
        self._count_error(f"export_dropped_{reason}", n)
        self._warn(detail or reason)

    def failure(self, kind: str, detail: str, n: int = 1) -> None:
        """Count ``n`` failed operations (``export_write_failed``, ``export_open_failed``) and warn, rate-limited."""
        with self._lock:
            self._failures[kind] += n
        self._count_error(kind, n)
        self._warn(detail)

    def _warn(self, detail: str) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._warned_at < WARN_INTERVAL_S:
                return
            self._warned_at = now
            dropped, reasons = self.dropped, dict(self.by_reason)
            failures = dict(self._failures)
        _log.warning(
            "%s: %s; %d span(s) dropped so far%s%s (counted in errors(); this warning repeats at most every %g s)",
            self.name,
            detail,
            dropped,
            f" {reasons}" if reasons else "",
            f", failures {failures}" if failures else "",
            WARN_INTERVAL_S,
        )

    def record_due(self, *, force: bool) -> int | None:
        """The count to put in a drop record now, or None when none is due."""
        with self._lock:
            if self.dropped == self._recorded:
                return None
            if not force and time.monotonic() - self._recorded_at < DROP_RECORD_INTERVAL_S:
                return None
            return self.dropped

    def recorded(self, count: int) -> None:
        """A drop record carrying ``count`` reached the file."""
        with self._lock:
            self._recorded = max(self._recorded, count)
            self._recorded_at = time.monotonic()


def _any_value(value: Any) -> dict[str, Any]:
    """An OTLP JSON AnyValue for a resource attribute value (str, bool, int, float or a sequence of them)."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}  # OTLP JSON: 64-bit integers as decimal strings
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [_any_value(v) for v in value]}}
    return {"stringValue": str(value)}


def drop_record_line(resource_attributes: Mapping[str, Any], ledger_count: int, writer_id: str) -> bytes:
    """The drop record: one OTLP JSON line, this process's resource plus the two loss attributes, no spans."""
    attributes: list[dict[str, Any]] = [
        {"key": key, "value": _any_value(value)}
        for key, value in resource_attributes.items()
        if key not in (DROPPED_SPANS_KEY, WRITER_ID_KEY)
    ]
    attributes.append({"key": DROPPED_SPANS_KEY, "value": {"intValue": str(ledger_count)}})
    attributes.append({"key": WRITER_ID_KEY, "value": {"stringValue": writer_id}})
    doc = {"resourceSpans": [{"resource": {"attributes": attributes}, "scopeSpans": []}]}
    return json.dumps(doc, separators=(",", ":")).encode("utf-8") + b"\n"


def read_drop_records(lines: Sequence[bytes | str]) -> dict[str, int]:
    """Largest dropped count per writer id in OTLP JSON lines (the reading rule, for tests and tools)."""
    out: dict[str, int] = {}
    for raw in lines:
        try:
            doc = json.loads(raw)
            for rs in doc.get("resourceSpans", ()):
                attrs = {a["key"]: a["value"] for a in rs.get("resource", {}).get("attributes", ())}
                if DROPPED_SPANS_KEY in attrs and WRITER_ID_KEY in attrs:
                    writer = attrs[WRITER_ID_KEY]["stringValue"]
                    out[writer] = max(out.get(writer, 0), int(attrs[DROPPED_SPANS_KEY]["intValue"]))
        except (ValueError, TypeError, KeyError, AttributeError):
            continue  # a torn or foreign line: not a drop record
    return out
