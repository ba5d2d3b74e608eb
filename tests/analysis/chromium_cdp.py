"""Headless Chromium driven over the DevTools protocol, for the HTML timeline tests.

The protocol runs over a pipe (``--remote-debugging-pipe``: the browser reads
commands on fd 3 and writes replies on fd 4, each message JSON ended by a NUL),
so the tests need no WebSocket client and open no port. Input goes through
``Input.dispatch*Event`` (the page sees real wheel, mouse and key events, as it
would from a user), pixels come back from ``Page.captureScreenshot`` and are
decoded by ``png_pixels`` (zlib and the five PNG row filters: no image library).
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import struct
import subprocess
import time
import zlib
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: Generous: two cores are shared by several test runs; nothing here is a timing assertion.
TIMEOUT_S = 60.0


class ChromiumError(RuntimeError):
    """The browser answered a command with an error, or did not answer in time."""


class Browser:
    """One headless Chromium process; ``page(width, height)`` opens a tab of that size."""

    def __init__(self, profile: Path) -> None:
        assert CHROMIUM is not None
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire_pipes() -> None:  # in the child, before exec: the protocol's fds are 3 and 4
            # Copies first: a pipe end may itself be fd 3 or 4, and dup2 onto itself keeps close-on-exec.
            read, write = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(read, 3)
            os.dup2(write, 4)

        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--no-first-run", "--hide-scrollbars", "--force-device-scale-factor=1",
               f"--user-data-dir={profile}", "about:blank"]
        self.proc = subprocess.Popen(cmd, preexec_fn=wire_pipes, close_fds=False,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buf = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> Any:
        """One command; its result, or ChromiumError."""
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session is not None:
            msg["sessionId"] = session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise ChromiumError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str, session: str | None) -> dict[str, Any]:
        """The first event ``method`` (already received or still to come) of ``session``."""
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            for i, ev in enumerate(self.events):
                if ev.get("method") == method and ev.get("sessionId") == session:
                    return self.events.pop(i)
            self.events.append(self._read(deadline))

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise ChromiumError("no answer from chromium in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise ChromiumError("chromium closed the protocol pipe")
            self._buf += chunk
        raw, _, self._buf = self._buf.partition(b"\0")
        return dict(json.loads(raw))

    def page(self, url: str, width: int, height: int) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})
        session = self.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})["sessionId"]
        page = Page(self, session, target["targetId"])
        page.send("Page.enable")
        page.send("Runtime.enable")  # uncaught exceptions arrive as events (Page.errors)
        page.send("Log.enable")  # and so do the browser's own errors: a CSP refusal, a failed load
        page.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        page.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired", session)
        return page

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (ChromiumError, OSError):
            pass
        try:
            self.proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)


class Page:
    """One tab: evaluate script, send input, take screenshots."""

    def __init__(self, browser: Browser, session: str, target: str) -> None:
        self.browser = browser
        self.session = session
        self.target = target

    def send(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return self.browser.send(method, params, self.session)

    def errors(self) -> list[str]:
        """Uncaught script exceptions and error-level browser log entries of this tab so far."""
        out = []
        for ev in self.browser.events:
            if ev.get("sessionId") != self.session:
                continue
            if ev.get("method") == "Runtime.exceptionThrown":
                out.append(str(ev["params"]["exceptionDetails"]))
            elif ev.get("method") == "Log.entryAdded" and ev["params"]["entry"]["level"] == "error":
                out.append(str(ev["params"]["entry"]))
        return out

    def js(self, expression: str) -> Any:
        """The value of a script expression (JSON-serialisable); a thrown exception is a ChromiumError."""
        out = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in out:
            raise ChromiumError(f"{expression[:80]}: {out['exceptionDetails']}")
        return out["result"].get("value")

    def settle(self) -> None:
        """Wait for two animation frames: the page redraws on requestAnimationFrame after input."""
        self.js("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))")

    def wheel(self, x: float, y: float, delta_y: float, delta_x: float = 0.0) -> None:
        self.send("Input.dispatchMouseEvent",
                  {"type": "mouseWheel", "x": x, "y": y, "deltaX": delta_x, "deltaY": delta_y})
        self.settle()

    def drag(self, x0: float, y: float, x1: float) -> None:
        self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x0, "y": y})
        self.send("Input.dispatchMouseEvent",
                  {"type": "mousePressed", "x": x0, "y": y, "button": "left", "buttons": 1, "clickCount": 1})
        steps = 5
        for i in range(1, steps + 1):
            self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x0 + (x1 - x0) * i / steps, "y": y,
                                                   "button": "left", "buttons": 1})
        self.send("Input.dispatchMouseEvent",
                  {"type": "mouseReleased", "x": x1, "y": y, "button": "left", "buttons": 0, "clickCount": 1})
        self.settle()

    def click(self, x: float, y: float) -> None:
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent",
                      {"type": kind, "x": x, "y": y, "button": "left", "buttons": 1, "clickCount": 1})
        self.settle()

    def click_selector(self, selector: str) -> None:
        """Click the middle of the element ``selector`` finds (scrolled into view first)."""
        box = self.js(f"(() => {{const e = document.querySelector({json.dumps(selector)}); e.scrollIntoView("
                      "{block: 'center'}); const r = e.getBoundingClientRect();"
                      " return [r.left + r.width / 2, r.top + r.height / 2];})()")
        self.click(box[0], box[1])

    def key(self, key: str, code: str, key_code: int) -> None:
        """A key press as the keyboard makes it (keyDown with its text, keyUp)."""
        text = key if len(key) == 1 else ""
        self.send("Input.dispatchKeyEvent", {"type": "keyDown", "key": key, "code": code, "text": text,
                                             "windowsVirtualKeyCode": key_code})
        self.send("Input.dispatchKeyEvent", {"type": "keyUp", "key": key, "code": code,
                                             "windowsVirtualKeyCode": key_code})
        self.settle()

    def screenshot(self, path: Path | None = None, clip: tuple[float, float, float, float] | None = None) -> bytes:
        """A PNG of the viewport (or of ``clip`` = x, y, width, height in CSS px), written to ``path`` if given."""
        params: dict[str, Any] = {"format": "png"}
        if clip is not None:
            params["clip"] = {"x": clip[0], "y": clip[1], "width": clip[2], "height": clip[3], "scale": 1}
        png = base64.b64decode(self.send("Page.captureScreenshot", params)["data"])
        if path is not None:
            path.write_bytes(png)
        return png

    def pixels(self, x: float, y: float, w: int, h: int) -> list[list[tuple[int, int, int]]]:
        """The RGB values of the w x h CSS pixels from viewport point (x, y), as drawn on screen."""
        sx, sy = self.js("[scrollX, scrollY]")  # a screenshot's clip is in page coordinates
        return png_pixels(self.screenshot(clip=(x + sx, y + sy, w, h)))

    def close(self) -> None:
        self.browser.send("Target.closeTarget", {"targetId": self.target})


def png_pixels(png: bytes) -> list[list[tuple[int, int, int]]]:
    """Rows of RGB triples of an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium writes)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(png):
        (length,), kind = struct.unpack(">I", png[pos:pos + 4]), png[pos + 4:pos + 8]
        body = png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    prev, rows = bytearray(stride), []
    for r in range(height):
        kind, line = raw[r * (stride + 1)], bytearray(raw[r * (stride + 1) + 1:(r + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([(line[i], line[i + 1], line[i + 2]) for i in range(0, stride, bpp)])
        prev = line
    return rows
