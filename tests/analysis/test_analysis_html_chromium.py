"""The HTML timeline as a user sees it: headless Chromium renders it, the script
draws every span and hop, and the numbers in the rendered DOM match the JSON
(spec/analysis.md §6.3). Skips with a reason when chromium is not installed
(mk/analysis.mk installs it as root)."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tempotrace_sdk.analysis import analyze_file, write_html

from .tracegen import write_trace

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (make test installs it as root)")


class _Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, tuple[str, str]] = {}
        self.svg: dict[str, str] = {}
        self._key: tuple[str, str] | None = None
        self.hops: list[dict[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "td" and "data-key" in a and "data-value" in a:
            self._key = (a["data-key"], a["data-value"])
        if tag == "svg" and a.get("id") == "timeline":
            self.svg = a
        if tag == "line" and a.get("class") == "hop":
            self.hops.append(a)

    def handle_data(self, data: str) -> None:
        if self._key is not None and self._key[0] not in self.values:
            self.values[self._key[0]] = (self._key[1], data.strip())

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._key = None


def _render(page: Path, tmp_path: Path) -> str:
    assert CHROMIUM is not None
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'prof'}",
           "--dump-dom", page.as_uri()]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
    return out.stdout


def test_rendered_page_matches_the_json(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    clocks = {"c": "sim:ptp", "w1": "sim:ptp", "w2": "sim:liar", "w3": "sim:ptp", "w4": "sim:ptp", "w5": "sim:ntp"}
    write_trace(str(trace), clocks)
    report = analyze_file(str(trace), keep=10_000)
    page = tmp_path / "t.html"
    write_html(report, str(page))
    dom = _Dom()
    dom.feed(_render(page, tmp_path))
    summary = report.to_dict()["summary"]
    assert set(dom.values) == set(summary)
    for key, value in summary.items():
        raw, shown = dom.values[key]
        assert int(raw) == value and int(re.sub(r"[^0-9]", "", shown)) == value, key
    # The script ran: every span and hop was drawn, hops coloured by method, the liar's in red.
    assert int(dom.svg["data-drawn-spans"]) == report.spans
    assert int(dom.svg["data-drawn-hops"]) == report.hops == len(dom.hops)
    outcomes = {h["data-outcome"] for h in dom.hops}
    assert "contradiction" in outcomes and "consistent" in outcomes
    assert {h["data-method"] for h in dom.hops} >= {"physics"}
    assert summary["lying_hosts"] == 1
