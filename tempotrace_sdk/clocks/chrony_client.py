"""Asking chronyd for its tracking data over its command socket, as ``chronyc tracking`` does.

Two ways in, tried in order by ``auto``:

- chronyd's Unix datagram socket (``bindcmdaddress``, Debian's default
  ``/run/chrony/chronyd.sock``). Only root and chronyd's own user may use it.
  chronyd answers to the sender's address, so we bind our own socket, and
  (as chronyc does, client.c ``open_unix_socket``) in a fresh directory
  beside chronyd's: chronyd often runs with a private /tmp (systemd
  ``PrivateTmp=yes``) where a socket of ours would be invisible to it.
- UDP to 127.0.0.1 / ::1 port 323 (``cmdport``): chronyd allows monitoring
  commands such as TRACKING from localhost by default, so any user can ask.
  Only a port bound by root or chronyd's user is asked (``/proc/net/udp``):
  where unprivileged ports start at 0, as in many containers, anyone could
  bind it and answer.

Every exchange is bounded by ``timeout_s`` and runs on the clock refresher
thread, never in ``now()``. Failures raise ``ClockError`` naming the socket.
"""

from __future__ import annotations

import errno
import os
import pwd
import secrets
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import ClockError
from .chrony_candm import REPLY_LEN, ChronyTracking, decode_tracking_reply, encode_tracking_request, reply_sequence

__all__ = ["CHRONY_ENV", "DEFAULT_SOCKETS", "DEFAULT_TIMEOUT_S", "UDP_PORT", "ChronyTarget", "query_tracking", "target"]

#: Where to ask: ``auto`` (default), ``off``, or the path of chronyd's Unix socket.
CHRONY_ENV = "TEMPOTRACE_CHRONY"
#: chronyd's default socket (Debian/Fedora build), then the older /var/run spelling.
DEFAULT_SOCKETS = ("/run/chrony/chronyd.sock", "/var/run/chrony/chronyd.sock")
#: chronyd's default command port (candm.h DEFAULT_CANDM_PORT).
UDP_PORT = 323
#: chronyd's user in Debian/Ubuntu (_chrony) and Fedora/RHEL (chrony).
CHRONY_USERS = ("_chrony", "chrony")
#: One exchange on one socket. chronyc waits 1 s and retries; a refresh once a
#: second cannot afford that, and a local daemon answers in well under 1 ms.
DEFAULT_TIMEOUT_S = 0.25


class ChronyTarget:
    """Where to find chronyd: ``mode`` is "auto", "off" or "unix" (with ``path``)."""

    def __init__(self, mode: str, path: str | None = None) -> None:
        self.mode = mode
        self.path = path

    def __repr__(self) -> str:
        return f"ChronyTarget({self.mode!r}, {self.path!r})"

    def describe(self) -> str:
        if self.mode == "off":
            return f"chrony disabled (${CHRONY_ENV}=off)"
        if self.mode == "unix":
            return f"unix:{self.path}"
        return f"auto ({', '.join(DEFAULT_SOCKETS)}, then udp 127.0.0.1/::1 port {UDP_PORT})"


def target(spec: str | None = None) -> ChronyTarget:
    """Parse ``spec`` (default: $TEMPOTRACE_CHRONY): auto, off/none/0, or an absolute socket path."""
    raw = (os.environ.get(CHRONY_ENV, "") if spec is None else spec).strip()
    if raw.lower() in ("", "auto"):
        return ChronyTarget("auto")
    if raw.lower() in ("off", "none", "0", "false", "no"):
        return ChronyTarget("off")
    if raw.startswith("/"):
        return ChronyTarget("unix", raw)
    raise ValueError(f"{CHRONY_ENV}={raw!r}: must be 'auto', 'off' or the absolute path of chronyd's Unix socket")


@contextmanager
def _unix_socket(server_path: str) -> Iterator[socket.socket]:
    """A datagram socket bound in a new private directory beside ``server_path`` and connected to it."""
    parent = os.path.dirname(server_path) or "."
    try:
        # mkdtemp makes a new 0700 directory under an unguessable name, so
        # nobody (not even chronyd's user, who owns ``parent``) can plant a
        # path there first. chronyd must reach our socket: open it up after.
        private = tempfile.mkdtemp(prefix="tempotrace.", dir=parent)
    except OSError as err:
        raise ClockError(err.errno or errno.EACCES, f"chronyd socket {server_path}: {err.strerror}") from err
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
    try:
        own = os.path.join(private, "sock")
        sock.bind(own)
        os.chmod(own, 0o666)
        os.chmod(private, 0o711)
        sock.connect(server_path)
        yield sock
    except OSError as err:
        if isinstance(err, ClockError):
            raise
        raise ClockError(err.errno or errno.EIO, f"chronyd socket {server_path}: {err.strerror or err}") from err
    finally:
        sock.close()
        shutil.rmtree(private, ignore_errors=True)


def _exchange(sock: socket.socket, where: str, timeout_s: float) -> ChronyTracking:
    sequence = secrets.randbits(32)
    deadline = time.monotonic() + timeout_s
    try:
        sock.send(encode_tracking_request(sequence))
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ClockError(errno.ETIMEDOUT, f"chronyd at {where}: no answer within {timeout_s:g} s")
            sock.settimeout(left)
            data = sock.recv(REPLY_LEN + 512)
            if reply_sequence(data) not in (sequence, None):
                continue  # a late answer to an earlier request of ours
            try:
                return decode_tracking_reply(data, sequence)
            except ClockError as err:
                raise ClockError(errno.EPROTO, f"chronyd at {where}: {err.strerror}") from err
    except TimeoutError as err:
        raise ClockError(errno.ETIMEDOUT, f"chronyd at {where}: no answer within {timeout_s:g} s") from err
    except OSError as err:
        if isinstance(err, ClockError):
            raise
        raise ClockError(err.errno or errno.EIO, f"chronyd at {where}: {err.strerror or err}") from err


def _query_unix(path: str, timeout_s: float) -> ChronyTracking:
    with _unix_socket(path) as sock:
        return _exchange(sock, f"unix:{path}", timeout_s)


def _port_owners(family: int) -> set[int] | None:
    """The uids owning UDP sockets bound to port 323 on loopback or any address; None if /proc cannot say."""
    table = "/proc/net/udp6" if family == socket.AF_INET6 else "/proc/net/udp"
    # /proc/net/udp{,6} print each address word in host byte order: 127.0.0.1 is
    # 0100007F on little-endian machines; ::1 ends in 01000000 the same way.
    loopback = socket.inet_pton(family, "::1" if family == socket.AF_INET6 else "127.0.0.1")
    wanted = {_proc_address(loopback), _proc_address(bytes(len(loopback)))}
    try:
        with open(table, encoding="ascii") as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return None
    owners: set[int] = set()
    for line in lines:
        fields = line.split()
        if len(fields) < 8 or ":" not in fields[1]:
            continue
        address, port = fields[1].rsplit(":", 1)
        if int(port, 16) == UDP_PORT and address in wanted:
            owners.add(int(fields[7]))
    return owners


def _proc_address(packed: bytes) -> str:
    return "".join(f"{int.from_bytes(packed[i : i + 4], sys.byteorder):08X}" for i in range(0, len(packed), 4))


def _trusted_uids() -> set[int]:
    """root (chronyd binds its command port before dropping privileges) and chronyd's own user."""
    uids = {0}
    for name in CHRONY_USERS:
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            pass
    return uids


def _query_udp(host: str, timeout_s: float) -> ChronyTracking:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    where = f"udp:[{host}]:{UDP_PORT}" if family == socket.AF_INET6 else f"udp:{host}:{UDP_PORT}"
    # Where unprivileged ports start at 0 (many container runtimes) anyone may
    # bind the port: only a socket of root's or chronyd's user is chronyd.
    owners = _port_owners(family)
    if owners is None:
        raise ClockError(errno.EPERM, f"chronyd at {where}: cannot tell who owns the port (no /proc/net): not asked")
    strangers = sorted(owners - _trusted_uids())
    if strangers:
        raise ClockError(
            errno.EPERM,
            f"chronyd at {where}: the port is bound by uid {strangers[0]}, not root or chronyd's user "
            f"({'/'.join(CHRONY_USERS)}): not asked",
        )
    with socket.socket(family, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        try:
            sock.connect((host, UDP_PORT))
        except OSError as err:
            raise ClockError(err.errno or errno.EIO, f"chronyd at {where}: {err.strerror or err}") from err
        return _exchange(sock, where, timeout_s)


def query_tracking(where: ChronyTarget | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> ChronyTracking:
    """chronyd's TRACKING report. Raises ClockError saying every place it asked and why each failed.

    ``auto`` tries the default Unix sockets that exist and can be opened,
    then UDP on the loopback addresses; each try is bounded by ``timeout_s``.
    """
    where = where if where is not None else target()
    if where.mode == "off":
        raise ClockError(errno.ENOENT, where.describe())
    if where.mode == "unix":
        assert where.path is not None
        return _query_unix(where.path, timeout_s)
    failures: list[str] = []
    for path in dict.fromkeys(os.path.realpath(p) for p in DEFAULT_SOCKETS if os.path.exists(p)):
        try:
            return _query_unix(path, timeout_s)
        except ClockError as err:
            failures.append(str(err.strerror))
    for host in ("127.0.0.1", "::1"):
        try:
            return _query_udp(host, timeout_s)
        except ClockError as err:
            failures.append(str(err.strerror))
            if err.errno == errno.ETIMEDOUT:  # something listens but does not answer: do not wait twice
                break
    raise ClockError(errno.ECONNREFUSED, "; ".join(failures))
