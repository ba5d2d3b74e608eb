"""Where spans go: OTLP JSON lines in a local file by default, a collector when asked.

The file exporter is ``opentelemetry-exporter-otlp-json-file``'s
``FileSpanExporter`` writing into an ``AppendStream``: each export batch is
one JSON line, written with a single ``write(2)`` on an ``O_APPEND`` file
descriptor, so several processes (a multi-worker job, a forked child) may
share one file without ever interleaving lines. With a directory instead of
a file, every process writes its own ``spans-<pid>.jsonl`` (re-chosen after
fork).
"""

from __future__ import annotations

import importlib
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, cast

from opentelemetry.sdk.trace.export import SpanExporter

__all__ = [
    "DEFAULT_EXPORT_PATH",
    "EXPORT_DIR_ENV",
    "EXPORT_PATH_ENV",
    "AppendStream",
    "file_exporter",
    "select_exporter",
]

EXPORT_PATH_ENV = "TEMPOTRACE_EXPORT_PATH"
EXPORT_DIR_ENV = "TEMPOTRACE_EXPORT_DIR"
#: Used when neither a path, a directory nor a collector is configured.
DEFAULT_EXPORT_PATH = "tempotrace-spans.jsonl"


class AppendStream(io.TextIOBase):
    """A text stream whose ``flush()`` is one ``write(2)`` on an ``O_APPEND`` fd.

    ``path_for_pid`` names the file for a process id; it is called again in
    a forked child, so per-process files stay per process.
    """

    def __init__(self, path_for_pid: Callable[[int], str]) -> None:
        super().__init__()
        self._path_for_pid = path_for_pid
        self._pid = -1
        self._fd = -1
        self._path = ""
        self._buffer: list[str] = []
        self._open()

    @property
    def path(self) -> str:
        return self._path

    def _open(self) -> None:
        pid = os.getpid()
        path = self._path_for_pid(pid)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._pid, self._path = pid, path

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._buffer.append(text)
        return len(text)

    def flush(self) -> None:
        if self.closed or not self._buffer:
            return
        if os.getpid() != self._pid:  # forked: the child gets its own file (when per-process)
            if self._path_for_pid(os.getpid()) != self._path:
                os.close(self._fd)
                self._open()
        data = "".join(self._buffer).encode("utf-8")
        self._buffer.clear()
        view = memoryview(data)
        while view:  # a short write happens only on a full disk or a signal
            view = view[os.write(self._fd, view) :]

    def close(self) -> None:
        if self.closed:
            return
        try:
            self.flush()
        finally:
            os.close(self._fd)
            super().close()


def file_exporter(
    path: str | os.PathLike[str] | None = None, directory: str | os.PathLike[str] | None = None
) -> tuple[SpanExporter, str]:
    """An OTLP JSON-lines file exporter and the path it writes (for this process)."""
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter

    if directory is not None:
        base = os.fspath(directory)

        def per_process(pid: int) -> str:
            return os.path.join(base, f"spans-{pid}.jsonl")

        stream = AppendStream(per_process)
    else:
        fixed = os.fspath(path) if path is not None else DEFAULT_EXPORT_PATH
        stream = AppendStream(lambda _pid: fixed)
    return FileSpanExporter(stream=cast(IO[str], stream)), stream.path


def _otlp_exporter() -> SpanExporter:
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    package = "grpc" if protocol.strip() == "grpc" else "http"
    try:
        module = importlib.import_module(f"opentelemetry.exporter.otlp.proto.{package}.trace_exporter")
    except ImportError as err:
        raise ImportError(
            f"OTLP export ({protocol}) needs the collector exporter: "
            f"pip install opentelemetry-exporter-otlp-proto-{package}"
        ) from err
    exporter: SpanExporter = module.OTLPSpanExporter()  # reads the standard OTEL_EXPORTER_OTLP_* variables
    return exporter


def select_exporter(
    path: str | os.PathLike[str] | None, directory: str | os.PathLike[str] | None
) -> tuple[list[SpanExporter], str | None]:
    """Exporters from arguments and the environment, and the local file path if any.

    Order: an explicit path/directory (argument or TEMPOTRACE_EXPORT_PATH /
    TEMPOTRACE_EXPORT_DIR); else OTEL_TRACES_EXPORTER (``otlp``, ``console``,
    ``none``, ``otlp_json_file``); else OTLP when OTEL_EXPORTER_OTLP_ENDPOINT
    or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set; else the default file.
    """
    path = path if path is not None else (os.environ.get(EXPORT_PATH_ENV) or None)
    directory = directory if directory is not None else (os.environ.get(EXPORT_DIR_ENV) or None)
    if path is not None or directory is not None:
        exporter, where = file_exporter(path, directory)
        return [exporter], where
    names = [n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    if names:
        exporters: list[SpanExporter] = []
        file_path: str | None = None
        for name in names:
            if name == "none":
                continue
            if name == "otlp":
                exporters.append(_otlp_exporter())
            elif name == "console":
                from opentelemetry.sdk.trace.export import ConsoleSpanExporter

                exporters.append(ConsoleSpanExporter())
            elif name == "otlp_json_file":
                exporter, file_path = file_exporter()
                exporters.append(exporter)
            else:
                raise ValueError(
                    f"OTEL_TRACES_EXPORTER: unknown exporter {name!r} (otlp, console, otlp_json_file, none)"
                )
        return exporters, file_path
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return [_otlp_exporter()], None
    exporter, where = file_exporter()
    return [exporter], where
