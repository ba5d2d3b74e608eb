"""Drive one adapter subprocess over the line-based JSON protocol (PROTOCOL.md)."""

from __future__ import annotations

import json
import queue
import subprocess
import tempfile
import threading
from typing import IO, Any

MAX_RESTARTS = 20  # a crashing adapter is restarted so later vectors still run, up to this many times
# An adapter that exits this many times in a row without ever having answered
# cannot start (missing dependency, wrong command): stop at once and say why,
# instead of restarting it for every vector.
START_ATTEMPTS = 2
# The wait for an answer grows with the request: a valid text of 2^20 sends is 5.2 MB in and 43 MB out, which
# took our Python codec 6-12 s on a 2-core machine (C: 1 s). PROTOCOL.md states it.
SECONDS_PER_MB = 4.0


class AdapterStartError(RuntimeError):
    """The adapter command cannot be run, or exits before answering anything."""


class Adapter:
    """One implementation under test: a command that answers requests line by line."""

    def __init__(self, name: str, argv: list[str], timeout: float = 10.0, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.argv = argv
        self.timeout = timeout
        self.env = env
        self.problems: list[str] = []  # crashes, stderr output, bad exit codes
        self.restarts = 0
        self.answers = 0  # responses received, over every restart
        self._silent_exits = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._stderr: IO[bytes] | None = None
        self._next_id = 0

    # -- process lifecycle ----------------------------------------------------
    def _start(self) -> subprocess.Popen[bytes]:
        self._stderr = tempfile.TemporaryFile()
        try:
            self._proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=self.env
            )
        except OSError as err:
            raise AdapterStartError(f"cannot run {self.argv[0]!r}: {err}") from err
        self._lines = queue.Queue()
        stdout = self._proc.stdout
        assert stdout is not None
        threading.Thread(target=self._pump, args=(stdout, self._lines), daemon=True).start()
        return self._proc

    @staticmethod
    def _pump(stream: IO[bytes], lines: queue.Queue[bytes | None]) -> None:
        for line in iter(stream.readline, b""):
            lines.put(line)
        lines.put(None)  # EOF

    def _stderr_tail(self, limit: int = 2000) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        data = self._stderr.read().decode("utf-8", "replace")
        return data[-limit:]

    def _reap(self, reason: str) -> None:
        """Stop the current process and record why, with its exit status and stderr."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
        try:
            code = proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        if reason or code != 0:
            # Sanitizer reports end in a non-zero status (see mk/conformance.mk); plain
            # stderr chatter such as log warnings is not a failure by itself.
            tail = self._stderr_tail()
            self.problems.append(f"{reason or 'exit'}: exit status {code}" + (f"; stderr:\n{tail}" if tail else ""))
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def close(self) -> None:
        """Close stdin and wait; a non-zero exit status (e.g. a sanitizer report) is a problem."""
        self._reap("")

    def _exited_silently(self) -> None:
        """Count an exit before any answer ever; raise AdapterStartError when it keeps happening."""
        if self.answers:
            return
        self._silent_exits += 1
        if self._silent_exits >= START_ATTEMPTS:
            raise AdapterStartError(
                f"exited {self._silent_exits} times without answering a request\n{self.problems[-1]}"
            )

    # -- requests ---------------------------------------------------------------
    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send one request, return its response (or an adapterError describing what went wrong)."""
        proc = self._proc
        if proc is None:
            if self.restarts > MAX_RESTARTS:
                return {"adapterError": "adapter crashed too often; not restarted"}
            proc = self._start()
        self._next_id += 1
        rid = str(self._next_id)
        line = json.dumps({"id": rid, **request}, separators=(",", ":"), ensure_ascii=True) + "\n"
        try:
            assert proc.stdin is not None
            proc.stdin.write(line.encode("ascii"))
            proc.stdin.flush()
            raw = self._lines.get(timeout=self.timeout + len(line) / 1e6 * SECONDS_PER_MB)
        except (OSError, queue.Empty) as err:
            what = "timed out" if isinstance(err, queue.Empty) else f"write failed ({err})"
            self.restarts += 1
            self._reap(f"request {rid} {what}")
            if isinstance(err, OSError):  # it exited before reading the request
                self._exited_silently()
            return {"adapterError": f"adapter {what}"}
        if raw is None:
            self.restarts += 1
            self._reap(f"adapter died on request {rid}")
            self._exited_silently()
            return {"adapterError": "adapter exited without answering"}
        self.answers += 1
        try:
            resp = json.loads(raw)
        except ValueError:
            return {"adapterError": f"response is not JSON: {raw[:200]!r}"}
        if not isinstance(resp, dict):
            return {"adapterError": f"response is not an object: {raw[:200]!r}"}
        if resp.get("id") != rid:
            return {"adapterError": f"response id {resp.get('id')!r} does not match request id {rid!r}"}
        return resp
