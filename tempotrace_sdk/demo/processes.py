"""Starting, watching and always stopping the demo's worker processes.

Every worker runs in its own session (process group), has its stdin held by
the coordinator (EOF tells it to finish and flush) and is stopped on every
path out of the demo: success, failure, Ctrl-C and SIGTERM. A worker whose
coordinator is SIGKILLed sees its stdin close and exits by itself.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO

__all__ = ["WorkerError", "WorkerProcess", "WorkerSpec", "shutdown_all", "start_workers", "terminate_on_signals"]

#: How long a worker may take to import OpenTelemetry and listen (2 shared cores).
READY_TIMEOUT_S = 30.0
#: How long a worker may take to flush its spans and exit after stdin closes.
EXIT_TIMEOUT_S = 10.0


class WorkerError(RuntimeError):
    """A worker failed to start, answered with an error, or died."""


@dataclass(frozen=True)
class WorkerSpec:
    rank: int
    profile: str  #: label, e.g. "ptp", "ntp", "liar"
    clock: str  #: TEMPOTRACE_CLOCK value, e.g. "sim:ntp,offset=-450us,seed=3"
    host: str  #: TEMPOTRACE_HOST value: the simulated host
    log: Path  #: its stderr


@dataclass
class WorkerProcess:
    spec: WorkerSpec
    process: subprocess.Popen[bytes]
    port: int = 0
    log_handle: IO[bytes] | None = field(default=None, repr=False)

    def tail(self, lines: int = 15) -> str:
        """The end of the worker's stderr, for error messages."""
        try:
            text = self.spec.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])


def _environment(spec: WorkerSpec, trace_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "OTEL_PROPAGATORS": "tracecontext,baggage,tempotrace",
            "TEMPOTRACE_CLOCK": spec.clock,
            "TEMPOTRACE_HOST": spec.host,
            "TEMPOTRACE_EXPORT_PATH": str(trace_path),
            "PYTHONUNBUFFERED": "1",
        }
    )
    # Settings from the user's shell must not send the demo's spans elsewhere.
    for key in list(env):
        if key.startswith("OTEL_EXPORTER_") or key in ("OTEL_TRACES_EXPORTER", "TEMPOTRACE_EXPORT_DIR"):
            del env[key]
    return env


def start_workers(specs: list[WorkerSpec], trace_path: Path) -> list[WorkerProcess]:
    """Start every worker and wait for all of them to print ``READY <port>``.

    On any failure the workers started so far are stopped before raising.
    """
    workers: list[WorkerProcess] = []
    try:
        for spec in specs:
            log = spec.log.open("wb")
            command = [
                sys.executable,
                "-m",
                "tempotrace_sdk.demo.worker",
                "--rank",
                str(spec.rank),
                "--world",
                str(len(specs)),
                "--profile",
                spec.profile,
            ]
            process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=_environment(spec, trace_path),
                start_new_session=True,  # its own process group: Ctrl-C reaches the coordinator only
            )
            workers.append(WorkerProcess(spec, process, log_handle=log))
        _await_ready(workers)
    except BaseException:
        shutdown_all(workers, graceful=False)
        raise
    return workers


def _await_ready(workers: list[WorkerProcess]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    # Keyed by file descriptor: the selector hands back what was registered.
    pending = {w.process.stdout.fileno(): w for w in workers if w.process.stdout is not None}
    buffers: dict[int, bytes] = {}
    with selectors.DefaultSelector() as selector:
        for fd in pending:
            selector.register(fd, selectors.EVENT_READ)
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                late = ", ".join(f"rank {w.spec.rank}" for w in pending.values())
                raise WorkerError(f"workers not ready after {READY_TIMEOUT_S:.0f} s: {late}")
            for key, _ in selector.select(timeout=min(remaining, 0.5)):
                fd = key.fd
                worker = pending[fd]
                chunk = os.read(fd, 4096)
                if not chunk:
                    raise WorkerError(
                        f"rank {worker.spec.rank} exited before it was ready (code {worker.process.wait()}):\n"
                        + worker.tail()
                    )
                data = buffers.get(worker.spec.rank, b"") + chunk
                buffers[worker.spec.rank] = data
                if b"\n" in data:
                    line = data.split(b"\n", 1)[0].decode(errors="replace")
                    if not line.startswith("READY "):
                        raise WorkerError(f"rank {worker.spec.rank} said {line!r} instead of READY")
                    worker.port = int(line.split()[1])
                    selector.unregister(fd)
                    del pending[fd]


def check_alive(workers: list[WorkerProcess]) -> None:
    """Raise ``WorkerError`` naming the first worker that has died."""
    for worker in workers:
        code = worker.process.poll()
        if code is not None:
            raise WorkerError(f"rank {worker.spec.rank} died (exit code {code}):\n{worker.tail()}")


def _signal_group(worker: WorkerProcess, sig: int) -> None:
    try:
        os.killpg(worker.process.pid, sig)  # the session leader's pid is its group id
    except (ProcessLookupError, PermissionError):
        pass


def shutdown_all(workers: list[WorkerProcess], *, graceful: bool = True) -> list[int | None]:
    """Stop every worker; return their exit codes.

    Graceful: close stdin (the worker flushes its spans and exits 0), wait,
    then SIGTERM, then SIGKILL whatever is left. Not graceful: straight to
    SIGTERM/SIGKILL.
    """
    if graceful:
        for worker in workers:
            if worker.process.stdin is not None:
                try:
                    worker.process.stdin.close()
                except OSError:
                    pass
        _wait_all(workers, EXIT_TIMEOUT_S)
    for sig, wait_s in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
        alive = [w for w in workers if w.process.poll() is None]
        if not alive:
            break
        for worker in alive:
            _signal_group(worker, sig)
        _wait_all(alive, wait_s)
    for worker in workers:
        for stream in (worker.process.stdin, worker.process.stdout, worker.log_handle):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
    return [w.process.poll() for w in workers]


def _wait_all(workers: list[WorkerProcess], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    for worker in workers:
        try:
            worker.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass


@contextmanager
def terminate_on_signals() -> Iterator[None]:
    """Turn SIGTERM (and SIGHUP) into KeyboardInterrupt so ``finally`` blocks run."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, interrupt)
        except ValueError:  # not the main thread: leave signals alone
            pass
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
