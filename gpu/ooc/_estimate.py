"""Which neighbour arrays will a batch read most? Random walks guided by the plans (GCSM
section 2.4), on the CPU, while the GPU still matches the previous batch.

M walks start at roots drawn uniformly from the batch's (task, plan) pairs and are merged
into one execution of the matching loop (:mod:`._walks`). Formula (3) makes
the estimate unbiased; formula (5) says how many walks rank the cache's last vertex
correctly with confidence delta: after a first round of ``walks``, C_y is set to the
estimate of the last vertex that fits the cache, and more walks run if (5) asks for them,
up to ``max_walks`` (the bound keeps the estimate a small share of the batch: (5) grows
with D^(n-2) and would otherwise ask for millions on a power-law graph).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numba as nb
import numpy as np
import numpy.typing as npt

from .._executor import MatchTasks, plan_units
from ..graph._host import HostGraph, ranges
from ..planning._planner import F_NBCNT, PlanSet
from . import _walks as K

__all__ = ["Estimate", "WalkConfig", "estimate_reads", "exact_reads"]


@dataclass(frozen=True, slots=True)
class WalkConfig:
    #: walks in the first round
    walks: int = 512
    #: at most this many in all (formula (5) asks for more on skewed graphs) ...
    max_walks: int = 16384
    #: ... and at most this many per (task, plan) root: small batches match in a few
    #: milliseconds, and estimating them must stay a small share of that
    max_walks_per_root: float = 2.0
    #: rank vertices whose read counts differ by a factor (1 + alpha) ...
    alpha: float = 1.0
    #: ... correctly with this confidence (delta)
    confidence: float = 0.9
    seed: int = 7
    #: walks move to a uniform child and weigh by the branching (Knuth's estimator),
    #: instead of formula (3)'s stop-or-move with probability |V|/D
    branching: bool = True
    #: estimate bytes read (each read weighs the label range it scans) rather than reads:
    #: what a cache saves, so the cache can rank vertices by bytes saved per byte held
    weigh_bytes: bool = True


@dataclass(frozen=True, slots=True)
class Estimate:
    vertices: npt.NDArray[np.int64]   # read at least once by a walk, most-read first
    reads: npt.NDArray[np.float64]    # estimated reads (or bytes read) of each
    walks: int
    seconds: float


def _run(graph: HostGraph, plans: PlanSet, tasks: MatchTasks, owner: npt.NDArray[np.int64],
         plan: npt.NDArray[np.int64], walks: npt.NDArray[np.int64], exhaustive: bool,
         branching: bool, weigh_bytes: bool, seed: int, dense: npt.NDArray[np.float64],
         ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Events (vertex, weight) of the roots with walks > 0."""
    sel = np.flatnonzero(walks)
    o, p, w = owner[sel], plan[sel], walks[sel]
    n = plans.n[p].astype(np.int64)
    reads_per_node = plans.table[:, F_NBCNT, :].sum(axis=1).astype(np.int64)[p]
    cap = (0 if exhaustive else 1 + w * np.maximum(n - 3, 0)) * reads_per_node
    base = np.zeros(len(sel) + 1, np.int64)
    np.cumsum(cap, out=base[1:])
    ev_v = np.empty(max(1, int(base[-1])), np.int32)
    ev_w = np.empty(max(1, int(base[-1])), np.float64)
    nv = graph.num_vertices
    used = K.walk(tasks.a[o], tasks.b[o], tasks.label[o], tasks.tick[o], p.astype(np.int32), w,
                  base[:-1], len(owner), max(1, graph.max_degree_bound()), exhaustive, branching,
                  weigh_bytes,
                  np.uint64(seed), min(nb.get_num_threads(), max(1, len(sel))),
                  graph.max_degree_bound(), int(w.max()) if len(w) else 1, plans.table,
                  plans.nb_level, plans.nb_label, graph.seg_off[:nv], graph.seg_len[:nv],
                  graph.loff[:nv],
                  graph.vlabel[:nv], graph.key, graph.elab, graph.ct, graph.dt, ev_v, ev_w,
                  dense)
    if exhaustive:
        return np.zeros(0, np.int64), np.zeros(0)
    idx = ranges(base[:-1], used)
    return ev_v[idx].astype(np.int64), ev_w[idx]


def estimate_reads(graph: HostGraph, plans: PlanSet, tasks: MatchTasks, cfg: WalkConfig,
                   keep: Callable[[npt.NDArray[np.int64], npt.NDArray[np.float64]],
                                  npt.NDArray[np.int64]]) -> Estimate:
    """Estimated neighbour-array reads (or bytes) of matching ``tasks``; ``keep(vertices,
    estimates)`` says which of them the cache would hold (formula (5)'s C_y is the
    smallest estimate kept)."""
    t0 = time.perf_counter()
    owner, plan = plan_units(tasks)
    R = len(owner)
    if R == 0:
        return Estimate(np.zeros(0, np.int64), np.zeros(0), 0, 0.0)
    rng = np.random.default_rng(cfg.seed)
    dense = np.zeros((1, 1))

    def walk(m: int, seed: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        walks = np.bincount(rng.integers(R, size=m), minlength=R).astype(np.int64)
        return _run(graph, plans, tasks, owner, plan, walks, False, cfg.branching,
                    cfg.weigh_bytes, seed, dense)

    events = [walk(cfg.walks, cfg.seed)]
    total = cfg.walks
    verts, reads = _merge(events, total)
    if len(verts):
        kept = keep(verts, reads)
        cy = float(reads[kept].min()) if len(kept) else float(reads[0])
        n = int(plans.n.max())
        D = max(1, graph.max_degree_bound())
        a, d = cfg.alpha, cfg.confidence
        need = (n - 1) * (2 + a) * R * float(D) ** max(n - 2, 0) / (a * a * (1 - d) * cy)
        cap = min(cfg.max_walks, max(cfg.walks, int(cfg.max_walks_per_root * R)))
        extra = int(min(need, cap)) - total
        if extra > 0:
            events.append(walk(extra, cfg.seed + 1))
            total += extra
            verts, reads = _merge(events, total)
    return Estimate(verts, reads, total, time.perf_counter() - t0)


def _merge(events: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]],
           walks: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Per vertex, the summed event weights over ``walks`` walks, largest first."""
    v = np.concatenate([e[0] for e in events])
    w = np.concatenate([e[1] for e in events])
    if len(v) == 0:
        return v, w
    uniq, inv = np.unique(v, return_inverse=True)
    reads = np.bincount(inv, weights=w) / walks
    order = np.argsort(-reads, kind="stable")
    return uniq[order], reads[order]


def exact_reads(graph: HostGraph, plans: PlanSet, tasks: MatchTasks,
                weigh_bytes: bool = False) -> npt.NDArray[np.float64]:
    """Exact reads (or bytes) per vertex under the estimator's model: every node once."""
    owner, plan = plan_units(tasks)
    threads = max(1, min(nb.get_num_threads(), len(owner)))
    dense = np.zeros((threads, max(2, graph.num_vertices)))
    if len(owner):
        _run(graph, plans, tasks, owner, plan, np.ones(len(owner), np.int64), True, False,
             weigh_bytes, 0, dense)
    return dense.sum(axis=0)[:graph.num_vertices]
