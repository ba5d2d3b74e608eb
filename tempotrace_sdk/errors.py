"""One small exception tree for the whole SDK.

Every error is catchable by our base class *and* by the builtin it resembles,
so callers who already handle ``ValueError`` or ``OSError`` keep working
(the pattern of pyca/pynacl ``nacl.exceptions``).

A caller's own mistake (building a header with a bad field) and a remote
peer's bad bytes are different things: ``HeaderError.remote`` says which, and
the message says it too (h11's LocalProtocolError / RemoteProtocolError).
"""

from __future__ import annotations

__all__ = [
    "ClockError",
    "FieldError",
    "HeaderError",
    "LengthError",
    "PolicyError",
    "StampsError",
    "TempoTraceError",
    "TextFormError",
    "VersionError",
]


class TempoTraceError(Exception):
    """Base class of every error the SDK raises on purpose."""


class HeaderError(TempoTraceError, ValueError):
    """A tt-ext header (or a value meant for one) breaks a rule of the spec.

    ``field`` names the header field (or ``"text"`` / ``"length"``),
    ``error_class`` is the language-neutral class used by conformance vectors
    (spec/tt-ext-v3.md §7), ``rule`` states the broken rule in words, and
    ``remote`` is True when the bytes came from a peer rather than from the
    caller's own arguments.
    """

    error_class = "HEADER"

    def __init__(
        self,
        field: str,
        rule: str,
        *,
        error_class: str | None = None,
        remote: bool = False,
    ) -> None:
        self.field = field
        self.rule = rule
        if error_class is not None:
            self.error_class = error_class
        self.remote = remote
        origin = "received header" if remote else "header value"
        super().__init__(f"{origin}: {field}: {rule} [{self.error_class}]")

    def as_remote(self) -> HeaderError:
        """Return a copy of this error marked as coming from a peer."""
        err = type(self)(self.field, self.rule, error_class=self.error_class, remote=True)
        return err


class LengthError(HeaderError):
    """The binary form is not exactly 53 bytes."""

    error_class = "LENGTH"


class VersionError(HeaderError):
    """The version nibble is not 3."""

    error_class = "VERSION"


class FieldError(HeaderError):
    """A field holds a value outside its range or enumeration."""


class TextFormError(HeaderError):
    """The 71-character text form breaks one of its rules."""


class ClockError(TempoTraceError, OSError):
    """A clock could not be read or opened.

    Carries ``errno`` and, when a device was involved, ``filename`` (the
    path), like any ``OSError``.
    """


class PolicyError(TempoTraceError, ValueError):
    """A confidence-policy file is malformed; names the line and field."""


class StampsError(TempoTraceError, ValueError):
    """A ``tempotrace.stamps`` span attribute breaks a rule of its text (semantic-conventions §1.4).

    ``token`` is the tag of the token at fault (``s``, ``e``, ``r``, ``k``, ``x``), ``rule`` the rule
    in words, ``error_class`` the rule's stable, language-neutral name used by the conformance vectors
    (``STAMPS_START``, ``STAMPS_RANGE``, ...: semantic-conventions §1.4). Raised by readers of exported
    spans (a writer's own text never breaks one).
    """

    def __init__(self, token: str, rule: str, *, error_class: str) -> None:
        self.field = "tempotrace.stamps"
        self.token = token
        self.rule = rule
        self.error_class = error_class
        super().__init__(f"tempotrace.stamps: token {token!r}: {rule}")
