"""What chrony adds to the CPU clock, as ratios against peers in the same run.

    python benchmarks/bench_chrony.py [--json]

- the CPU snapshot with chronyd's verdict vs the kernel-only snapshot: the cost of an
  inline re-snapshot on the hot path when the refresher stalls (no I/O either way);
- one TRACKING exchange (what the refresher does once a second) vs the adjtimex read it
  already did: against a stand-in chronyd on a Unix socket in this process, or the real
  chronyd at $TEMPOTRACE_CHRONY when that names a socket.
CpuClock.now() itself is unchanged by chrony: bench_clock.py measures it.
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import Row, emit, measure
from tempotrace_sdk.clocks import cpu
from tempotrace_sdk.clocks.chrony import ChronyHealth
from tempotrace_sdk.clocks.chrony_candm import REPLY_LEN, decode_tracking_reply, encode_float
from tempotrace_sdk.clocks.chrony_client import ChronyTarget, query_tracking, target
from tempotrace_sdk.clocks.kernel import read_kernel_sync

# A synchronised TRACKING reply (header + body as candm.h lays them out), sequence patched per request.
_HEAD = struct.pack(">BBBBHHHHHHIII", 6, 2, 0, 0, 33, 5, 0, 0, 0, 0, 0, 0, 0)
_BODY = struct.pack(
    ">I16sHHHHIII9I",
    0x0A4D0001,
    bytes([10, 77, 0, 1]) + bytes(12),
    1,
    0,
    2,
    0,
    0,
    int(time.time()),
    0,
    *(encode_float(v) for v in (-2.6e-6, 4e-9, 1.4e-8, 0.001, 5e-5, 0.015, 8.5e-6, 2e-6, 1.0)),
)
assert len(_HEAD + _BODY) == REPLY_LEN


def _stand_in(path: str, stop: threading.Event) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        sock.settimeout(0.1)
        while not stop.is_set():
            try:
                request, sender = sock.recvfrom(1024)
            except TimeoutError:
                continue
            reply = bytearray(_HEAD + _BODY)
            reply[16:20] = request[8:12]  # echo the sequence
            sock.sendto(bytes(reply), sender)


def main() -> None:
    kernel = measure(read_kernel_sync)
    rows = [Row("adjtimex (the refresher's kernel read)", kernel)]

    health = ChronyHealth(ChronyTarget("unix", "/nonexistent"))  # never asked: a synchronised answer is replayed
    health.observe(decode_tracking_reply(_HEAD + _BODY, 0), time.monotonic_ns(), time.time())
    plain = measure(lambda: cpu._snapshot(None))
    with_chrony = measure(lambda: cpu._snapshot(health))
    rows.append(Row("CPU snapshot, kernel rule only", plain))
    rows.append(Row("CPU snapshot with chronyd's verdict", with_chrony, "kernel rule only", with_chrony / plain))

    configured = target()
    if configured.mode == "unix":
        where, label = configured, f"TRACKING exchange, chronyd at {configured.path}"
        exchange = measure(lambda: query_tracking(where), min_time=0.5)
        rows.append(Row(label, exchange, "adjtimex", exchange / kernel))
    else:
        run = tempfile.mkdtemp(prefix="ttbench-")
        path = os.path.join(run, "chronyd.sock")
        stop = threading.Event()
        thread = threading.Thread(target=_stand_in, args=(path, stop), daemon=True)
        thread.start()
        while not os.path.exists(path):
            time.sleep(0.01)
        try:
            stand_in = ChronyTarget("unix", path)
            exchange = measure(lambda: query_tracking(stand_in), min_time=0.5)
            rows.append(Row("TRACKING exchange, stand-in chronyd", exchange, "adjtimex", exchange / kernel))
        finally:
            stop.set()
            thread.join(5)
            os.unlink(path)
            os.rmdir(run)
    emit("chrony on the CPU clock (ratio = ours / peer; off the hot path except the inline re-snapshot)", rows)


if __name__ == "__main__":
    main()
