"""Starting, watching and always stopping the ``torchrun`` job of the demo (stdlib only: no torch here).

The coordinator starts ``python -m torch.distributed.run`` (the ``torchrun``
command) in its own session, reads the progress events the ranks print on
stdout (one JSON object a line after ``MARKER``; every other line goes to
``torchrun.log``), and stops everything on every path out: success,
failure, Ctrl-C and SIGTERM. torchrun starts each rank in a session of its
own, so stopping torchrun's process group is not enough: the ranks are
stopped by their own process groups too (their pids come from their first
event and from /proc). A rank whose coordinator is SIGKILLed sees its
stdin (inherited through torchrun, written by nobody) close and exits.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .processes import WorkerError

__all__ = ["MARKER", "TorchrunJob", "emit"]

#: Prefix of a progress line a rank prints on stdout.
MARKER = "TEMPOTRACE-DEMO "
#: No event for this long means the job is stuck (five torch imports on a loaded 2-core machine take ~10 s;
#: a collective waits at most the process group's timeout, rank.COLLECTIVE_TIMEOUT_S, before it fails).
SILENCE_TIMEOUT_S = 180.0
#: How long torchrun may take to exit once the last rank said it is done (spans flushed by then).
EXIT_TIMEOUT_S = 60.0


def emit(kind: str, **fields: Any) -> None:
    """Print one progress event for the coordinator (rank side).

    One write of the whole line: the ranks share torchrun's stdout pipe, and a
    write of at most PIPE_BUF (4 KiB on Linux) octets is never interleaved with another.
    """
    sys.stdout.flush()
    os.write(1, (MARKER + json.dumps({"kind": kind, **fields}) + "\n").encode())


class TorchrunJob:
    """One ``torchrun`` run of a rank module (``tempotrace_sdk.demo.rank`` by default) with ``world`` ranks."""

    def __init__(self, world: int, rank_args: list[str], env: dict[str, str], log: Path,
                 module: str = "tempotrace_sdk.demo.rank") -> None:
        self.command = [
            sys.executable, "-m", "torch.distributed.run",
            "--standalone", "--nproc-per-node", str(world), "--max-restarts", "0",
            "--module", module, *rank_args,
        ]
        self.log = log
        self._log_handle: IO[bytes] = log.open("wb")
        self.rank_pids: set[int] = set()
        self.process = subprocess.Popen(
            self.command,
            stdin=subprocess.PIPE,  # inherited by every rank; held open by us alone (see module doc)
            stdout=subprocess.PIPE,
            stderr=self._log_handle,
            env=env,
            start_new_session=True,  # its own process group: Ctrl-C reaches the coordinator only
        )
        self._buffer = b""

    def events(self, idle_s: float | None = None) -> Iterator[dict[str, Any]]:
        """The ranks' progress events until torchrun closes its stdout; ``WorkerError`` if it falls silent.

        With ``idle_s``, an ``{"kind": "idle"}`` event after each ``idle_s`` without output, so that a
        caller can watch something else (the export file) between the ranks' events."""
        stdout = self.process.stdout
        assert stdout is not None
        fd = stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            deadline = time.monotonic() + SILENCE_TIMEOUT_S
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WorkerError(f"the training job made no progress for {SILENCE_TIMEOUT_S:.0f} s")
                if not selector.select(timeout=min(remaining, idle_s or 1.0)):
                    if idle_s is not None:
                        yield {"kind": "idle"}
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    return
                deadline = time.monotonic() + SILENCE_TIMEOUT_S
                self._buffer += chunk
                *lines, self._buffer = self._buffer.split(b"\n")
                for raw in lines:
                    event = self._event(raw.decode(errors="replace"))
                    if event is not None:
                        yield event

    def _event(self, line: str) -> dict[str, Any] | None:
        event: dict[str, Any] | None = None
        if line.startswith(MARKER):
            try:
                event = json.loads(line[len(MARKER):])
            except ValueError:
                event = None
        if not isinstance(event, dict) or "kind" not in event:
            self._log_handle.write((line + "\n").encode())  # a rank's own print: kept, not shown
            self._log_handle.flush()
            return None
        if event.get("kind") == "hello":
            self.rank_pids.add(int(event["pid"]))
        return event

    def wait(self) -> int:
        """torchrun's exit code, once every rank has finished (``WorkerError`` if it does not exit)."""
        try:
            return self.process.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise WorkerError(f"torchrun did not exit within {EXIT_TIMEOUT_S:.0f} s of its ranks' output") from None

    def stop(self, eof_grace_s: float = 0.0) -> None:
        """Stop torchrun and every rank (no-op for processes already gone); close our ends.

        The ranks' stdin is closed first; ``eof_grace_s`` gives them that long to exit on it before the
        signals: a rank blocked in a collective in C runs no SIGTERM handler, and one that can would
        start a dump that the EOF's exit then cuts off mid-line."""
        if self.process.poll() is None or self._alive_ranks():
            self.rank_pids |= set(_children(self.process.pid))
            if self.process.stdin is not None:
                _close(self.process.stdin)  # ranks see EOF and exit, even if torchrun is gone
            self._wait_gone(eof_grace_s)
            for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 3.0)):
                if self.stopped():
                    break
                # torchrun forwards SIGTERM to its ranks; their own groups get it too, in case it cannot.
                for pgid in (self.process.pid, *self._alive_ranks()):
                    _signal_group(pgid, sig)
                self._wait_gone(wait_s)
        for stream in (self.process.stdin, self.process.stdout, self._log_handle):
            if stream is not None:
                _close(stream)
        if self.process.poll() is None:
            self.process.wait(timeout=5)

    def stopped(self) -> bool:
        """torchrun and every rank it started have exited."""
        return self.process.poll() is not None and not self._alive_ranks()

    def _wait_gone(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self.stopped():
            time.sleep(0.05)

    def _alive_ranks(self) -> list[int]:
        return [pid for pid in self.rank_pids if _alive(pid)]

    def tail(self, lines: int = 15) -> str:
        """The end of torchrun's log (its own messages and the ranks' stray output)."""
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (Linux /proc; empty elsewhere)."""
    kids = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(entry))
    return kids


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)  # a session leader's pid is its group id
    except (ProcessLookupError, PermissionError):
        pass


def _close(stream: IO[Any]) -> None:
    try:
        stream.close()
    except OSError:
        pass
