"""Progress of a long analysis on stderr: spans read, rate, and an ETA when the input size is known.

Shown only on a terminal (``Progress.for_stream`` returns None otherwise, or
when the caller asked for quiet or machine output), at most every
``INTERVAL`` seconds, on one line that it rewrites.
"""

from __future__ import annotations

import time
from typing import IO

__all__ = ["Progress"]

INTERVAL = 1.0


class Progress:
    """Call ``update(spans, bytes_read)`` often; it prints when INTERVAL has passed."""

    def __init__(self, stream: IO[str], total_bytes: int | None, *, rewrite: bool = True) -> None:
        self.stream = stream
        self.total = total_bytes or None
        self.rewrite = rewrite
        self.t0 = time.monotonic()
        self.next_at = self.t0 + INTERVAL
        self.shown = False

    @classmethod
    def for_stream(cls, stream: IO[str], total_bytes: int | None, quiet: bool) -> Progress | None:
        """A Progress on a terminal unless ``quiet``; None when piped (nothing to rewrite, nobody watching)."""
        isatty = getattr(stream, "isatty", None)
        if quiet or isatty is None or not isatty():
            return None
        return cls(stream, total_bytes)

    def update(self, spans: int, bytes_read: int) -> None:
        now = time.monotonic()
        if now < self.next_at:
            return
        self.next_at = now + INTERVAL
        self.stream.write(("\r\x1b[K" if self.rewrite else "") + self.line(spans, bytes_read, now - self.t0)
                          + ("" if self.rewrite else "\n"))
        self.stream.flush()
        self.shown = True

    def line(self, spans: int, bytes_read: int, elapsed: float) -> str:
        rate = spans / elapsed if elapsed > 0 else 0.0
        text = f"analyze: {spans:,} spans, {rate:,.0f} spans/s"
        if self.total:
            done = min(1.0, bytes_read / self.total)
            text += f", {100 * done:.0f}% of {self.total / 1e6:,.0f} MB"
            if 0 < done < 1:
                eta = elapsed * (1 - done) / done
                text += f", ETA {int(eta) // 60}:{int(eta) % 60:02d}"
        return text

    def close(self) -> None:
        """Clear the progress line so the report starts on a clean line."""
        if self.shown and self.rewrite:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
