"""The line reader and the side-by-side order (spec/analysis.md §5.1): every line comes out whole, in
any block size, a line over the cap comes out as its length; several inputs interleave by progress."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tempotrace_sdk.analysis.inputs import interleave, read_lines

lines_st = st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"x")), max_size=30)


@settings(max_examples=300, deadline=None)
@given(lines=lines_st, trailing=st.booleans(), block=st.sampled_from([1, 2, 3, 7, 64, 4096]),
       cap=st.sampled_from([1, 5, 20, 1000]))
def test_lines_come_out_whole_whatever_the_block(tmp_path_factory: object, lines: list[bytes], trailing: bool,
                                                 block: int, cap: int) -> None:
    data = b"\n".join(lines) + (b"\n" if trailing and lines else b"")
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"tt-lines-{os.getpid()}"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        got = [x if isinstance(x, int) else bytes(x) for x in read_lines(fd, "t", cap, block)]
    finally:
        os.close(fd)
        path.unlink()
    want = data.split(b"\n")
    if want and want[-1] == b"":
        want.pop()
    assert got == [x if len(x) <= cap else len(x) for x in want]


def test_a_long_line_grows_the_buffer_while_a_view_is_still_held(tmp_path: Path) -> None:
    """A view is valid until the next line is asked for; a caller still holding one (a stale reference)
    must not stop the reader from reading on into a bigger buffer (a bytearray with a live view cannot
    be resized: the reader never resizes, it moves to a new one)."""
    path = tmp_path / "t"
    path.write_bytes(b"first\n" + b"y" * 100_000 + b"\nlast")
    fd = os.open(path, os.O_RDONLY)
    try:
        it = read_lines(fd, "t", 1 << 20, 64)
        held = next(it)
        assert isinstance(held, memoryview) and bytes(held) == b"first"
        long_line = next(it)
        assert isinstance(long_line, memoryview) and bytes(long_line) == b"y" * 100_000
        assert [bytes(x) for x in it if not isinstance(x, int)] == [b"last"]
        assert len(held) == 5
    finally:
        os.close(fd)


def test_interleave_reads_by_progress_and_is_reproducible() -> None:
    """The next item always comes from the stream least far through its size; the same lengths give
    the same order (the Dask engine replays it from line lengths alone)."""
    a = [10] * 10  # a file of 100 bytes in 10 lines
    b = [50] * 2  # a file of 100 bytes in 2 lines
    order = [i for i, _ in interleave([(100, iter(a)), (100, iter(b))], lambda n: n)]
    assert order.count(0) == 10 and order.count(1) == 2
    assert order[:2] == [0, 1] and order[2:7] == [0] * 5  # b is half done after one line: a catches up
    again = [i for i, _ in interleave([(100, iter(a)), (100, iter(b))], lambda n: n)]
    assert again == order
