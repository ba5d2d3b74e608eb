"""Strings from outside, shown on a terminal: escaped and cut, so they can neither drive the terminal nor
flood it (spec/analysis.md §6, spec/reliability.md §7).

Traces come from every process of a cluster, and in a shared cluster not every process is ours: a host
name, a span name or a file name can hold an escape sequence that clears the screen and prints a verdict
of its own, or a bidirectional override that shows a line's words in another order than they are. Every
human-readable printer (``tempotrace analyze``'s text report and warnings, ``tempotrace clock``, the
demo's summary, error and log lines on stderr) shows such strings through ``shown``. The JSON and HTML
outputs carry them as data, escaped by their own formats.

What is escaped: every character ``str.isprintable`` calls unprintable, in the form ``repr`` writes it
(``\\x1b``, ``\\n``, ``\\u202e``, ``\\udcff``, ``\\U000e0001``). That is the controls (C0, DEL, C1), the
format characters (the bidirectional marks, embeddings, overrides and isolates U+061C, U+200E, U+200F,
U+202A-U+202E, U+2066-U+2069; zero-width characters), lone surrogates (file names decoded with
``surrogateescape``: printed raw they make the print itself raise), line and paragraph separators, and
spaces other than ' '. Letters of any script are kept as they are.

What is not: the backslash. An error message that quotes a refused value by ``repr`` (values.py, the
clock sources) holds escapes already, and shows them once, not doubled; a value shown twice reads the
same. The price: a value may spell ``\\x1b`` in plain characters and read like one that held an ESC.
It still cannot move the cursor, colour or hide text, which is what this guards against (no escaping
can stop a name from merely looking like another: homoglyphs are letters).
"""

from __future__ import annotations

__all__ = ["LIMIT", "MESSAGE_LIMIT", "shown", "shown_lines"]

#: Characters of a name shown before it is cut (a host, service, span or clock name): longer than any DNS
#: name (253 characters, RFC 1035 §2.3.4), so a real host name is never cut.
LIMIT = 256
#: The same for a path, a reason or an error message that quotes the input: as deep a path as people
#: make, and a reason that quotes a refused value (values.py cuts the value itself at 60 characters).
MESSAGE_LIMIT = 1024

#: The short escapes repr writes; every other unprintable character is written by its code point.
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(char: str) -> str:
    short = _SHORT.get(char)
    if short is not None:
        return short
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _cut(dropped: int) -> str:
    return f"...(+{dropped:,} chars)"


def shown(value: object, limit: int | None = LIMIT) -> str:
    """``value`` (``str`` of it) as one field on one line of a terminal: unprintable characters escaped,
    line breaks too (a value is one field, and a newline in it could start a line that looks like ours),
    and cut after ``limit`` characters of what is shown, with ``...(+N chars)`` saying how many of the
    value's characters were left out (None: never cut). The cost on the common path, a printable value,
    is one ``isprintable`` scan of at most ``limit`` characters."""
    text = value if isinstance(value, str) else str(value)
    if limit is None or len(text) <= limit:
        if text.isprintable():
            return text
    elif text[:limit].isprintable():
        return text[:limit] + _cut(len(text) - limit)
    return _escaped(text, limit)


def _escaped(text: str, limit: int | None) -> str:
    """The slow path of ``shown``: character by character, stopping once ``limit`` characters are shown
    (so a hostile megabyte costs no more than a name)."""
    out: list[str] = []
    width = 0
    for i, char in enumerate(text):
        piece = char if char.isprintable() else _escape(char)
        width += len(piece)
        if limit is not None and width > limit:
            return "".join(out) + _cut(len(text) - i)
        out.append(piece)
    return "".join(out)


def shown_lines(text: str, limit: int | None = None) -> str:
    """Text this program composed, lines and all (an error with a worker's log under it): each line as
    ``shown`` shows a value, the line breaks kept. Values a caller already passed through ``shown`` come
    out unchanged, so this is the last guard of a printer, not a second escaping."""
    return "\n".join(shown(line, limit) for line in text.split("\n"))
