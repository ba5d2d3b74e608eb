"""Atomic writers for the three machine outputs (spec/analysis.md §6)."""

from __future__ import annotations

import json
from typing import IO

from .api import atomic_write
from .html import render_html
from .perfetto import perfetto_trace
from .report import AnalysisReport

__all__ = ["write_html", "write_json", "write_perfetto"]


def write_json(report: AnalysisReport, path: str) -> None:
    """The report as JSON (report.to_dict())."""
    atomic_write(path, lambda fh: json.dump(report.to_dict(), fh, indent=2))


def write_perfetto(report: AnalysisReport, path: str) -> None:
    """A Chrome trace-event file that ui.perfetto.dev opens."""
    atomic_write(path, lambda fh: json.dump(perfetto_trace(report), fh, separators=(",", ":")))


def write_html(report: AnalysisReport, path: str, max_spans: int | None = None) -> None:
    """A self-contained HTML timeline (no network fetches); at most ``max_spans`` spans drawn."""
    text = render_html(report, max_spans)

    def write(fh: IO[str]) -> None:
        fh.write(text)

    atomic_write(path, write)
