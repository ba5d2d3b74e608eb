"""``tempotrace analyze`` on a trace whose strings attack the terminal (issue 22; spec/analysis.md §6).

In a shared cluster not every process that writes spans is ours. The trace here is a real one (the
real SDK, processor and exporter: tracegen.py) with a lying clock, plus a torch collective (torchgen.py),
a refused span and a cut line (otlpgen.py), beside files that are not traces; hostile strings sit in
every field an output could print: host (``tempotrace.host`` and the Resource's ``host.name``),
``service.name``, span names, ``tempotrace.clock``, the group key's name, a span id quoted by a refusal,
file and folder names (an ESC; a byte that is no UTF-8, which Python holds as a lone surrogate). Every
human-readable output must show them escaped, no control character reaching stdout or stderr, and still
name the lying host recognisably. The demo's summary is checked on the same report.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tempotrace_sdk.analysis import analyze_file

from .otlpgen import line, span, stamp
from .torchgen import op_span
from .tracegen import write_trace

#: What must never reach a terminal from outside: C0 (but the line structure \n and \t), DEL, C1, the
#: bidirectional marks, embeddings, overrides and isolates, lone surrogates.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")

LIAR = "evil\x1b[2J\x1b[31mFAKE OK\x1b[0m"  #: clears the screen, prints a red verdict of its own
LIAR_SHOWN = "evil\\x1b[2J\\x1b[31mFAKE OK\\x1b[0m"
#: the real trace's hosts (and service and span names: tracegen names them after the host)
HOSTS = {"coord": "sim:ptp", "bidi\u202eKO": "sim:ptp", LIAR: "sim:liar", "c1\x9b31m": "sim:ptp", "del\x7f": "sim:ptp"}
#: the torch collective's last arriver, named by its Resource's host.name: an OSC title sequence in isolates
STRAGGLER = "\u2066osc\x1b]0;pwned\x07\u2069"
STRAGGLER_SHOWN = "\\u2066osc\\x1b]0;pwned\\x07\\u2069"
#: a span refused for its trace id, quoted by its span id (raw, in the reason)
REFUSED_ID = "\x1b[1A\x1b[2Kall good"
MS = 1_000_000


def _torch_lines() -> list[str]:
    """A 4-rank all_reduce, rank 3 last; hosts on the Resource (host.name), clocks and group name hostile."""
    out = []
    for rank, start in enumerate((0, 1_000, 2_000, 3 * MS)):
        s = op_span(rank, start, 10 * MS, group="0-3#grp\x1b[5m", clock="sim\x1b[1m")
        s["attributes"] = [kv for kv in s["attributes"] if kv["key"] != "tempotrace.host"]
        host = STRAGGLER if rank == 3 else f"rank{rank}\u202e"
        out.append(line([s], resource={"host.name": host, "service.name": "svc\x1b[2J"}))
    return out


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder (its name holding an ESC) of trace files and files that are not traces, all named hostilely."""
    folder = tmp_path_factory.mktemp("tt") / "run\x1b[2J"
    folder.mkdir()
    trace = folder / "spans-\x1b[31m.jsonl"
    refused = span(1, 0xA1, traceId="not hex", spanId=REFUSED_ID, name="name\x1b[2J", attrs=stamp("", 1_000, lts=1))
    trace.write_text(line([refused]) + "\n", encoding="utf-8")  # the first bad sample: the warning names it
    write_trace(str(trace), HOSTS)
    with trace.open("a", encoding="utf-8") as fh:
        fh.write("\n".join(_torch_lines()) + '\n{"resourceSpans": [{"\x1b[2J\n')  # and a line cut short
    (folder / "report\x1b[2J.json").write_text(json.dumps({"\x1b[31mkey": 1}) + "\n", encoding="utf-8")  # no trace
    fd = os.open(os.fsencode(folder) + b"/metrics-\xff.json", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"{}\n")
    os.close(fd)
    return folder


def _analyze(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "tempotrace_sdk", "analyze", *args], capture_output=True,
                          stdin=subprocess.DEVNULL, timeout=120, check=False)


def _text(stream: bytes) -> str:
    """The output as a terminal gets it: UTF-8 (strict: a surrogate printed raw is a byte no UTF-8 holds),
    with no control character from the input."""
    text = stream.decode("utf-8")
    found = CONTROL.search(text)
    assert found is None, f"{found.group()!r} reached the terminal in {text!r}"
    return text


def test_the_text_report_shows_every_hostile_string_escaped(hostile: Path, tmp_path: Path) -> None:
    html = tmp_path / "out\x1b[2J.html"
    out = _analyze(str(hostile), "--html", str(html))
    stdout, stderr = _text(out.stdout), _text(out.stderr)
    assert out.returncode == 0, stderr
    assert html.exists()
    lines = stdout.splitlines()
    assert lines[0].startswith("TempoTrace analysis of ") and "run\\x1b[2J/metrics-\\udcff.json" in lines[0]
    (fault,) = [x for x in lines if x.startswith("  clock fault: ")]
    assert fault.startswith(f"  clock fault: {LIAR_SHOWN} LYING (physics): ")  # the host, recognisable
    (straggler,) = [x for x in lines if x.startswith("    straggler: ")]
    assert straggler.startswith(f"    straggler: {STRAGGLER_SHOWN} rank 3 arrived last")
    (skipped,) = [x for x in lines if "unreadable lines" in x]
    assert "spans-\\x1b[31m.jsonl:1: span \\x1b[1A\\x1b[2Kall good: attribute traceId" in skipped
    (not_traces,) = [x for x in lines if "are not trace files" in x]
    assert "metrics-\\udcff.json: " in not_traces and "report\\x1b[2J.json: " in not_traces
    assert f"  wrote html: {tmp_path}/out\\x1b[2J.html" in lines


def test_warnings_on_stderr_with_json_are_escaped_and_the_json_carries_the_data(hostile: Path) -> None:
    out = _analyze(str(hostile), "--json")
    stderr = _text(out.stderr)
    assert out.returncode == 0, stderr
    assert "tempotrace analyze: warning: skipped 1 unreadable lines and 1 malformed spans" in stderr
    assert "\\x1b[1A\\x1b[2Kall good" in stderr and "report\\x1b[2J.json: " in stderr
    report = json.loads(_text(out.stdout))  # JSON escapes by its own rules: the data is intact
    assert report["lying_hosts"] == [LIAR]
    assert report["stragglers"][0]["host"] == STRAGGLER


def test_an_error_quoting_the_input_is_one_escaped_line(hostile: Path, tmp_path: Path) -> None:
    """--strict stops at the first bad line: the message names its path and quotes its reason."""
    out = _analyze(str(hostile), "--strict")
    stderr = _text(out.stderr)
    assert out.returncode == 2 and stderr.count("\n") == 1, stderr
    assert "spans-\\x1b[31m.jsonl:1: malformed span: span \\x1b[1A\\x1b[2Kall good" in stderr
    missing = _analyze(str(tmp_path / "gone\x1b]0;pwned\x07\udcff.jsonl"))  # no '[': not a glob
    assert missing.returncode == 2
    assert "gone\\x1b]0;pwned\\x07\\udcff.jsonl: cannot open" in _text(missing.stderr)


def test_the_demo_summary_shows_hosts_read_back_from_a_trace_escaped(hostile: Path, tmp_path: Path) -> None:
    """The demo prints its own ranks' names, read back from the trace it analyses: the summary shows a
    hostile one escaped all the same (fault, peers, the example hops). Its paths are the user's --out."""
    from tempotrace_sdk.demo.model import DemoResult
    from tempotrace_sdk.demo.plan import plan_ranks
    from tempotrace_sdk.demo.summary import examples, render_summary

    report = analyze_file(str(hostile), keep=10_000)
    paths: dict[str, Any] = {k: tmp_path / k for k in ("out", "trace", "report", "perfetto", "html")}
    result = DemoResult(plan_ranks(2, liar=True), report.to_dict(), paths, report.hops, 1.0)
    result.examples = examples(report.hops_kept, {LIAR})
    assert any(LIAR in (h["send_host"], h["recv_host"]) for h in report.hops_kept)
    text = render_summary(result)
    found = CONTROL.search(text)
    assert found is None, f"{found.group()!r} in {text!r}"
    assert f"  LYING clock: {LIAR_SHOWN}: broke its" in text
