"""Monte Carlo over causal event pairs: the paper's Table 2, then the same
edges through the ordering engine (spec/analysis.md §7).

Part 1 (Table 2): a message takes L to go from node i to node j; each node's
clock is off by its own error; a tracer that sorts raw timestamps inverts the
pair when L + (e_j − e_i) < 0. Three error models: ``gaussian`` (per node,
σ), ``laplace-node`` (per node Laplace with scale b = σ) and ``laplace-pair``
(the pairwise difference itself Laplace with b = σ). Each row says which
model reproduces the published rate.

Part 2 (engine): the same kind of edges, stamped with tt-ext fields: per class
a claimed bound (PTP 55 / 230 / 630 ns, NTP 3σ = 1.5 ms, which saturates the
16-bit field), honest errors drawn inside the bound, honest Lamport values and
real SVC sketches (bits from the real span-id hash), decided by
``order.decide_arrays``. Counted: decided fraction by method and wrong
confident decisions. A last run lets one node lie (claims 230 ns, is off by
50 µs) and shows it is caught, attributed, and that demoting its stamps
leaves no wrong decision.

Everything is drawn from one seeded numpy Generator: same seed, same numbers.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from ..wire.layout import SKETCH_BITS, SKETCH_HASHES, UNCERTAINTY_SATURATED
from ..wire.sketch import _indices_and_mask
from .faults import FaultLedger, add_bulk_physics
from .order import METHOD_CODES, RELATION_CODES, Method, Relation, decide_arrays

__all__ = ["PAPER_TABLE2", "run_simulation", "table2"]

#: Table 2 of the paper (operation, latency ns, published inversion % under NTP σ = 500 µs per node).
PAPER_TABLE2: tuple[tuple[str, int, float], ...] = (
    ("barrier", 6_000, 49.7),
    ("pipeline activation", 38_000, 47.9),
    ("all-to-all (MoE)", 145_000, 37.4),
    ("all-reduce", 1_820_000, 1.3),
)
NTP_SIGMA_NS = 500_000
MODELS = ("gaussian", "laplace-node", "laplace-pair")
#: Published rates are rounded to 0.1 percentage point; a model matches when within this.
MATCH_TOLERANCE_PP = 0.1
#: Engine classes: (name, claimed bound ns, actual error σ ns).
CLASSES: tuple[tuple[str, int, float], ...] = (
    ("PTP 55 ns", 55, 55 / 3),
    ("PTP 230 ns", 230, 230 / 3),
    ("PTP 630 ns", 630, 630 / 3),
    ("NTP 500 us", 3 * NTP_SIGMA_NS, NTP_SIGMA_NS),
)
LIAR_OFFSET_NS = 50_000


def _pair_error(rng: np.random.Generator, model: str, sigma: float, n: int) -> npt.NDArray[np.float64]:
    if model == "gaussian":
        return rng.normal(0.0, sigma, n) - rng.normal(0.0, sigma, n)
    if model == "laplace-node":
        return rng.laplace(0.0, sigma, n) - rng.laplace(0.0, sigma, n)
    if model == "laplace-pair":
        return rng.laplace(0.0, sigma, n)
    raise ValueError(f"unknown model {model!r} (use one of {', '.join(MODELS)})")


def analytic_rate(model: str, latency_ns: float, sigma: float) -> float:
    """P(L + δ < 0) in closed form, for checking the Monte Carlo."""
    x = latency_ns / sigma
    if model == "gaussian":  # δ ~ N(0, 2σ²)
        return 0.5 * math.erfc(x / 2.0)
    if model == "laplace-node":  # difference of two Laplace(b): tail e^{-x}(2 + x)/4
        return math.exp(-x) * (2.0 + x) / 4.0
    return 0.5 * math.exp(-x)  # laplace-pair


def table2(samples: int = 1_000_000, seed: int = 0, sigma_ns: float = NTP_SIGMA_NS) -> list[dict[str, Any]]:
    """Inversion rate per Table 2 row and model, and which model matches."""
    rng = np.random.default_rng(seed)
    errors = {m: _pair_error(rng, m, sigma_ns, samples) for m in MODELS}
    rows = []
    for op, latency, published in PAPER_TABLE2:
        sim = {m: 100.0 * float(np.mean(latency + errors[m] < 0)) for m in MODELS}
        exact = {m: 100.0 * analytic_rate(m, latency, sigma_ns) for m in MODELS}
        matches = [m for m in MODELS if abs(exact[m] - published) <= MATCH_TOLERANCE_PP]
        rows.append({
            "operation": op,
            "latency_ns": latency,
            "published_pct": published,
            "simulated_pct": sim,
            "analytic_pct": exact,
            "matches": matches,
            "closest": min(MODELS, key=lambda m: abs(exact[m] - published)),
        })
    return rows


# -- SVC sketches as 4 x uint64 words, bits from the real span-id hash ------------------
def _mask_words(pool: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    out = np.zeros((pool.shape[0], 4), dtype=np.uint64)
    for k, span_id in enumerate(pool.tolist()):
        mask = _indices_and_mask(int(span_id).to_bytes(8, "big"))[1]
        for w in range(4):
            out[k, w] = (mask >> (64 * (3 - w))) & 0xFFFFFFFFFFFFFFFF
    return out


def _popcount(words: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    if hasattr(np, "bitwise_count"):
        return np.asarray(np.bitwise_count(words).sum(axis=1), dtype=np.int64)
    bits = np.unpackbits(words.view(np.uint8), axis=1)  # pragma: no cover - numpy < 2
    return np.asarray(bits.sum(axis=1), dtype=np.int64)


def _contains(sketch: npt.NDArray[np.uint64], mask: npt.NDArray[np.uint64]) -> npt.NDArray[np.bool_]:
    return np.asarray(np.all(sketch & mask == mask, axis=1))


class _Sketches:
    """A pool of span ids with their masks and background causal pasts."""

    def __init__(self, rng: np.random.Generator, pool: int = 4096, backgrounds: int = 16384, max_past: int = 24):
        self.ids = rng.integers(1, 2**63, pool, dtype=np.int64).astype(np.uint64)
        self.masks = _mask_words(self.ids)
        bg = np.zeros((backgrounds, 4), dtype=np.uint64)
        sizes = rng.integers(0, max_past + 1, backgrounds)
        for k in range(max_past):
            pick = self.masks[rng.integers(0, pool, backgrounds)]
            bg |= np.where((sizes > k)[:, None], pick, np.uint64(0))
        self.backgrounds = bg


def _engine_run(
    rng: np.random.Generator,
    sk: _Sketches,
    n: int,
    nodes: int,
    bound_ns: int,
    sigma_ns: float,
    liar: int | None = None,
    start_fraction: float = 0.5,
    liar_offset_ns: int = LIAR_OFFSET_NS,
) -> dict[str, Any]:
    latencies = np.array([row[1] for row in PAPER_TABLE2], dtype=np.int64)
    src = rng.integers(0, nodes, n)
    dst = (src + rng.integers(1, nodes, n)) % nodes
    lat = latencies[rng.integers(0, latencies.shape[0], n)]
    t_a = rng.integers(10**18, 10**18 + 10**12, n)
    t_b = t_a + lat
    # Honest clocks keep their bound: the error is drawn with σ and clipped at the claim.
    err_a = np.clip(rng.normal(0.0, sigma_ns, n), -bound_ns, bound_ns)
    err_b = np.clip(rng.normal(0.0, sigma_ns, n), -bound_ns, bound_ns)
    if liar is not None:
        err_a = err_a + np.where(src == liar, liar_offset_ns, 0)
        err_b = err_b + np.where(dst == liar, liar_offset_ns, 0)
    ptp_a = t_a + np.rint(err_a).astype(np.int64)
    ptp_b = t_b + np.rint(err_b).astype(np.int64)
    u = np.full(n, min(bound_ns, UNCERTAINTY_SATURATED), dtype=np.int64)
    ok = np.ones(n, dtype=bool)
    lts_a = rng.integers(0, 10**6, n)
    lts_b = lts_a + 1 + rng.geometric(0.3, n)
    id_a = rng.integers(0, sk.ids.shape[0], n)
    id_b = (id_a + rng.integers(1, sk.ids.shape[0], n)) % sk.ids.shape[0]
    nbg = sk.backgrounds.shape[0]
    sketch_b = sk.backgrounds[rng.integers(0, nbg, n)] | sk.masks[id_a] | sk.masks[id_b]  # b's past holds a
    sketch_a = sk.backgrounds[rng.integers(0, nbg, n)] | sk.masks[id_a]
    a_start = rng.random(n) < start_fraction  # SVC speaks only for span starts (§2.3)
    a_in_b = a_start & _contains(sketch_b, sk.masks[id_a])
    b_in_a = _contains(sketch_a, sk.masks[id_b])
    rel, meth = decide_arrays(ptp_a, u, ok, lts_a, ptp_b, u, ok, lts_b, a_in_b, b_in_a)
    out = _outcomes(rel, meth)
    svc = meth == METHOD_CODES.index(Method.SVC)
    fp = (_popcount(sketch_b[svc]) / SKETCH_BITS) ** SKETCH_HASHES
    out["svc_fp_mean"] = float(fp.mean()) if fp.size else 0.0
    out["svc_fp_max"] = float(fp.max()) if fp.size else 0.0
    out["naive_inversions"] = int(np.count_nonzero(ptp_a > ptp_b))
    ledger = _ledger(rel, meth, src, dst, ptp_a, ptp_b, u, nodes)
    faults = ledger.attribute()
    out["faults"] = [f.to_dict() for f in faults]
    flagged = sorted({int(f.host.split("-")[1]) for f in faults})
    out["flagged_nodes"] = flagged
    if flagged:
        # Demote the flagged clocks: their stamps no longer count as physical time.
        ok_a = ~np.isin(src, flagged)
        ok_b = ~np.isin(dst, flagged)
        rel2, meth2 = decide_arrays(ptp_a, u, ok_a, lts_a, ptp_b, u, ok_b, lts_b, a_in_b, b_in_a)
        out["after_demotion"] = _outcomes(rel2, meth2)
    return out


def _outcomes(rel: npt.NDArray[np.int8], meth: npt.NDArray[np.int8]) -> dict[str, Any]:
    consistent = np.isin(rel, [RELATION_CODES.index(Relation.BEFORE), RELATION_CODES.index(Relation.NOT_AFTER)])
    undecided = rel == RELATION_CODES.index(Relation.UNDECIDED)
    wrong = ~consistent & ~undecided
    n = rel.shape[0]
    decided = {m.value: int(np.count_nonzero(consistent & (meth == METHOD_CODES.index(m))))
               for m in (Method.PHYSICS, Method.LAMPORT, Method.SVC)}
    decided["undecided"] = int(np.count_nonzero(undecided))
    wrong_by = {m.value: int(np.count_nonzero(wrong & (meth == METHOD_CODES.index(m))))
                for m in (Method.PHYSICS, Method.LAMPORT, Method.SVC)}
    return {"edges": n, "decided": decided, "wrong": wrong_by, "wrong_total": int(np.count_nonzero(wrong))}


def _ledger(rel: npt.NDArray[np.int8], meth: npt.NDArray[np.int8], src: npt.NDArray[np.int64],
            dst: npt.NDArray[np.int64], ptp_a: npt.NDArray[np.int64], ptp_b: npt.NDArray[np.int64],
            u: npt.NDArray[np.int64], nodes: int) -> FaultLedger:
    ledger = FaultLedger()
    per_node = np.bincount(src, minlength=nodes) + np.bincount(dst, minlength=nodes)
    for node, count in enumerate(per_node.tolist()):
        ledger.edges[f"node-{node}"] = count
    viol = (rel == RELATION_CODES.index(Relation.AFTER)) & (meth == METHOD_CODES.index(Method.PHYSICS))
    if np.any(viol):
        excess = (ptp_a - u) - (ptp_b + u)
        keys = src[viol] * nodes + dst[viol]
        uniq, inverse = np.unique(keys, return_inverse=True)
        counts = np.bincount(inverse)
        sums = np.bincount(inverse, weights=excess[viol])
        maxes = np.zeros(uniq.shape[0], dtype=np.int64)
        np.maximum.at(maxes, inverse, excess[viol])
        bound = int(u[0])
        for k, key in enumerate(uniq.tolist()):
            add_bulk_physics(ledger, f"node-{key // nodes}", f"node-{key % nodes}", int(counts[k]),
                             int(maxes[k]), int(sums[k]), bound, bound)
    return ledger


def run_simulation(
    edges: int = 1_000_000,
    seed: int = 0,
    nodes: int = 256,
    samples: int | None = None,
    ntp_sigma_ns: float = NTP_SIGMA_NS,
    liar_offset_ns: int = LIAR_OFFSET_NS,
) -> dict[str, Any]:
    """Table 2 plus the engine runs; a JSON-ready dict."""
    rng = np.random.default_rng(seed)
    sk = _Sketches(rng)
    classes = []
    specs = [*CLASSES[:3], (f"NTP {ntp_sigma_ns / 1000:g} us", int(3 * ntp_sigma_ns), ntp_sigma_ns)]
    for name, bound, sigma in specs:
        res = _engine_run(rng, sk, edges, nodes, bound, sigma)
        res.update({"class": name, "claimed_bound_ns": bound, "sigma_ns": sigma, "liar": None})
        classes.append(res)
    liar = _engine_run(rng, sk, edges, nodes, 230, 230 / 3, liar=7, liar_offset_ns=liar_offset_ns)
    liar.update({"class": "PTP 230 ns, node-7 lies", "claimed_bound_ns": 230, "sigma_ns": 230 / 3,
                 "liar": {"node": "node-7", "offset_ns": liar_offset_ns}})
    return {
        "schema": "tempotrace.simulation/1",
        "seed": seed,
        "edges_per_class": edges,
        "table2_samples": samples or edges,
        "nodes": nodes,
        "ntp_sigma_ns": ntp_sigma_ns,
        "table2": table2(samples or edges, seed, ntp_sigma_ns),
        "classes": classes,
        "liar": liar,
    }
