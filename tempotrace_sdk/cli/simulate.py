"""``tempotrace simulate``: the paper's Table 2 by Monte Carlo, and the ordering engine on the same edges
(spec/analysis.md §7)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..analysis.api import atomic_write
from ._common import EXIT_CHECK_FAILED, EXIT_CODES_HELP, EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, fail

__all__ = ["add_simulate_command", "format_simulation", "run_simulate"]


def add_simulate_command(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "simulate",
        help="Monte Carlo: reproduce the paper's Table 2, then run the edges through the ordering engine",
        description="Naive inversion rates under NTP (Gaussian / Laplace models) beside the paper's Table 2, "
        "and the ordering engine's decisions with tt-ext bounds (PTP 55/230/630 ns, NTP), honest and with one "
        "lying clock. Seeded and reproducible.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--edges", type=int, default=1_000_000, help="edges per class (default 1,000,000)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--nodes", type=int, default=256, help="nodes in the simulated cluster (default 256)")
    p.add_argument("--samples", type=int, default=None, help="Monte Carlo samples per Table 2 model (default: --edges)")
    p.add_argument("--ntp-sigma-ns", type=float, default=500_000.0,
                   help="per-node NTP clock error σ in ns, for Table 2 and the NTP class (default 500000)")
    p.add_argument("--liar-offset-ns", type=int, default=50_000,
                   help="how far the lying node's clock is off while claiming 230 ns (default 50000)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--out", metavar="FILE", help="also write the JSON results to FILE")
    p.set_defaults(func=run_simulate)
    return p


def run_simulate(args: argparse.Namespace) -> int:
    if args.edges < 1 or args.nodes < 8 or (args.samples is not None and args.samples < 1) or args.ntp_sigma_ns <= 0:
        return fail("simulate", "--edges and --samples must be >= 1, --nodes >= 8, --ntp-sigma-ns > 0", EXIT_USAGE)
    try:
        from ..analysis.simulate import run_simulation
    except ImportError as err:
        return fail("simulate", f"needs numpy (pip install 'tempotrace-sdk[analysis]'): {err}", EXIT_USAGE)
    result = run_simulation(args.edges, args.seed, args.nodes, args.samples, args.ntp_sigma_ns, args.liar_offset_ns)
    if args.out:
        try:
            atomic_write(args.out, lambda fh: json.dump(result, fh, indent=2))
        except OSError as err:
            return fail("simulate", f"cannot write {args.out}: {err}", EXIT_RUNTIME)
    print(json.dumps(result, indent=2) if args.json else format_simulation(result))
    honest_wrong = sum(c["wrong_total"] for c in result["classes"])
    return EXIT_CHECK_FAILED if honest_wrong else EXIT_OK


def format_simulation(result: dict[str, Any]) -> str:
    """The human table: Table 2 beside the paper, then the engine classes."""
    out = [f"Table 2 (naive inversion %, NTP σ = {result['ntp_sigma_ns'] / 1000:.0f} µs per node; "
           f"{result['table2_samples']:,} samples per model, seed {result['seed']})",
           f"  {'operation':<22}{'L':>9}  {'paper':>6}  {'gaussian':>9}  {'laplace-node':>12}  {'laplace-pair':>12}"
           "  matches"]
    for row in result["table2"]:
        sim = row["simulated_pct"]
        lat = row["latency_ns"]
        lat_s = f"{lat / 1000:g} µs" if lat < 1_000_000 else f"{lat / 1e6:g} ms"
        out.append(f"  {row['operation']:<22}{lat_s:>9}  {row['published_pct']:>6.1f}  {sim['gaussian']:>9.2f}  "
                   f"{sim['laplace-node']:>12.2f}  {sim['laplace-pair']:>12.2f}  {', '.join(row['matches']) or '-'}")
    pair_us = result["ntp_sigma_ns"] * 2**0.5 / 1000
    out.append(f"  (gaussian: per-node N(0, σ), σ_pair = {pair_us:.0f} µs; laplace-node: per-node Laplace(b = σ); "
               f"laplace-pair: pairwise Laplace(b = σ), σ_pair = {pair_us:.0f} µs)")
    out.append("")
    out.append(f"Ordering engine, {result['edges_per_class']:,} causal edges per class, {result['nodes']} nodes")
    out.append(f"  {'class':<26}{'physics':>9}{'lamport':>9}{'svc':>9}{'undecided':>10}{'WRONG':>7}"
               f"{'naive inv.':>12}  svc fp (mean/max)")
    for c in [*result["classes"], result["liar"]]:
        n = c["edges"]
        d = c["decided"]
        out.append(f"  {c['class']:<26}" + "".join(f"{100 * d[k] / n:>8.2f}%" for k in ("physics", "lamport", "svc"))
                   + f"{100 * d['undecided'] / n:>9.2f}%{c['wrong_total']:>7}{100 * c['naive_inversions'] / n:>11.2f}%"
                   + f"  {c['svc_fp_mean']:.1e}/{c['svc_fp_max']:.1e}")
    liar = result["liar"]
    flagged = [f for f in liar["faults"] if f["verdict"] == "lying"]
    out.append("")
    if not liar["faults"]:
        who = f"{liar['liar']['node']}, {liar['liar']['offset_ns']:,} ns off"
        out.append(f"  the liar ({who}) was not caught: its error never reversed a known edge beyond the bounds")
    for f in flagged:
        out.append(f"  lying clock caught: {f['host']}: {f['violations']:,} of {f['edges']:,} edges violated "
                   f"({100 * f['rate']:.1f}%), {f['peers']} peers, up to {f['max_excess_ns']:,} ns beyond the bounds")
    others = [f["host"] for f in liar["faults"] if f["host"] != liar["liar"]["node"]]
    reported = sum(f["violations"] for f in liar["faults"] if f["kind"] == "physics")
    out.append(f"  wrong decisions with the liar: {liar['wrong_total']:,}, reported as clock-fault evidence: "
               f"{reported:,}; honest hosts blamed: {len(others)}")
    after = liar.get("after_demotion")
    if after is not None:
        out.append(f"  after demoting the flagged clock's stamps: WRONG {after['wrong_total']}, physics "
                   f"{100 * after['decided']['physics'] / after['edges']:.2f}%, lamport "
                   f"{100 * after['decided']['lamport'] / after['edges']:.2f}%, svc "
                   f"{100 * after['decided']['svc'] / after['edges']:.2f}%")
    return "\n".join(out)
