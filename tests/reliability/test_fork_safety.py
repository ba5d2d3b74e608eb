"""Fork with a thread exporting never hangs the child (issue 13 item 1; spec/reliability.md §Process lifecycle).

A parent thread ends spans without pause while the main thread forks; each
child ends a span, flushes and leaves. Before the fix the child inherited the
file exporter's lock held by the parent's thread and hung at its first span
end (sync export) or in force_flush (batch).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _rel_helpers import FileContents, describe, run_python

FORK_WHILE_WRITING = r"""
import json, os, signal, sys, threading, time
from tempotrace_sdk.otel import configure, span

handle = configure(service_name="forker")
stop = threading.Event()

def writer():
    i = 0
    while not stop.is_set():
        with span(f"parent-{i}", attributes={"pad": "x" * 2000}):
            pass
        i += 1

thread = threading.Thread(target=writer, daemon=True)
thread.start()
time.sleep(0.2)
forks, hung = int(sys.argv[1]), 0
for n in range(forks):
    time.sleep(0.01)
    pid = os.fork()
    if pid == 0:
        with span(f"child-{n}"):
            pass
        handle.force_flush(10_000)
        os._exit(0)
    deadline = time.monotonic() + 15
    while True:  # a hung child is a failure: bounded wait, then kill it
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            hung += 1
            break
        time.sleep(0.005)
    if hung:
        break
stop.set()
thread.join()
handle.shutdown()
print(json.dumps({"hung": hung, "forks": forks}))
"""


@pytest.mark.parametrize("sync", ["1", "0"], ids=["sync-export", "batch-export"])
def test_fork_while_a_thread_exports_never_hangs_the_child(tmp_path: Path, sync: str) -> None:
    path = tmp_path / "spans.jsonl"
    result = run_python(
        FORK_WHILE_WRITING, "25", timeout=240, TEMPOTRACE_EXPORT_PATH=str(path), TEMPOTRACE_EXPORT_SYNC=sync
    )
    assert result.returncode == 0, describe(result)
    assert '"hung": 0' in result.stdout, describe(result)
    contents = FileContents(path)
    children = sorted(n for n in contents.names if n.startswith("child-"))
    assert len(children) == 25, f"child spans in the file: {children}"
    assert not contents.fragments and not contents.merged_lines()
