"""`make bench` must run to its end: bench_otel's written analysis of the floors (issue 12) once
crashed after the tables, because it picked rows by position and a row had been added."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_otel.py"


def test_bench_otel_prints_its_tables_and_the_floor_analysis() -> None:
    # one short round: this checks that the benchmark runs and says what it measured, not how fast
    run = subprocess.run([sys.executable, str(BENCH), "--rounds", "1", "--min-time", "0.002"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    out = run.stdout
    assert "## otel: per-span cost" in out and "## otel: propagator" in out
    floors = out[out.index("Floors"):]
    assert "Our processor adds" in floors and "Ours is" in floors and "None" not in floors
