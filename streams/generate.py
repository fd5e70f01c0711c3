"""Deterministic labelled power-law graphs, query sets and update streams.

Everything derives from one seed, so tests, benchmarks and the demo are reproducible
and the project never needs third-party data. Graphs are Chung-Lu with a power-law
weight sequence; queries are grown from random vertices of the graph (so they have
matches) in three shapes: ``tree``, ``sparse`` (tree + up to two chords) and ``dense``
(every induced edge); streams hold the held-out edges as insertions and a sample of
the initial edges as deletions, in random arrival order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpu import Query, UpdateBatch, UpdateOp

from .formats import csm
from .formats._common import GraphData

__all__ = ["Dataset", "GenConfig", "generate", "write_dataset"]

SHAPES = ("sparse", "dense", "tree")


@dataclass(frozen=True, slots=True)
class GenConfig:
    vertices: int = 20_000
    edges: int = 100_000
    labels: int = 16
    edge_labels: int = 1
    gamma: float = 2.3
    queries: int = 6
    min_query: int = 4
    max_query: int = 6
    #: share of the final graph's edges that arrive as insertions
    insert_ratio: float = 0.1
    #: share of the final graph's edges that are deleted by the stream
    delete_ratio: float = 0.02
    seed: int = 7

    def __post_init__(self) -> None:
        if self.vertices < 2 or self.edges < 1:
            raise ValueError("need at least 2 vertices and 1 edge")
        if self.edges > self.vertices * (self.vertices - 1) // 4:
            raise ValueError("too many edges for a sparse graph of this many vertices")
        if not 2 <= self.min_query <= self.max_query <= 12:
            raise ValueError("query sizes must satisfy 2 <= min <= max <= 12")
        if self.insert_ratio < 0 or self.delete_ratio < 0 or \
                self.insert_ratio + self.delete_ratio > 1:
            raise ValueError("insert_ratio and delete_ratio must be >= 0 and sum to <= 1")


@dataclass(frozen=True, slots=True)
class Dataset:
    graph: GraphData        # the final graph (initial + insertions)
    initial: GraphData
    stream: UpdateBatch
    queries: tuple[tuple[str, Query], ...]


def _power_law_edges(cfg: GenConfig, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n, m = cfg.vertices, cfg.edges
    w = (np.arange(n) + 1.0) ** (-1.0 / (cfg.gamma - 1.0))
    w /= w.sum()
    perm = rng.permutation(n)            # hubs get random ids
    keys = np.zeros(0, np.int64)
    while len(keys) < m:
        k = int(1.3 * (m - len(keys))) + 16
        a = perm[rng.choice(n, k, p=w)]
        b = perm[rng.choice(n, k, p=w)]
        ok = a != b
        lo, hi = np.minimum(a, b)[ok], np.maximum(a, b)[ok]
        new = (lo.astype(np.int64) << 32) | hi
        keys = np.concatenate([keys, new])
        _, first = np.unique(keys, return_index=True)
        keys = keys[np.sort(first)]
    keys = keys[:m]
    return (keys >> 32).astype(np.int64), (keys & 0xFFFFFFFF).astype(np.int64)


def _grow_query(rng: np.random.Generator, indptr: np.ndarray, nbrs: np.ndarray,
                edge_set: set[tuple[int, int]], labels: np.ndarray, size: int,
                shape: str) -> Query | None:
    start = int(rng.integers(0, len(indptr) - 1))
    if indptr[start + 1] == indptr[start]:
        return None
    chosen = [start]
    tree: list[tuple[int, int]] = []
    for _ in range(20 * size):
        if len(chosen) == size:
            break
        u = chosen[int(rng.integers(0, len(chosen)))]
        d = indptr[u + 1] - indptr[u]
        if d == 0:
            continue
        w = int(nbrs[indptr[u] + int(rng.integers(0, d))])
        if w not in chosen:
            chosen.append(w)
            tree.append((chosen.index(u), len(chosen) - 1))
    if len(chosen) < size:
        return None
    induced = [(i, j) for i in range(size) for j in range(i + 1, size)
               if (min(chosen[i], chosen[j]), max(chosen[i], chosen[j])) in edge_set]
    if shape == "tree":
        edges = tree
    elif shape == "sparse":
        chords = [e for e in induced if e not in tree and (e[1], e[0]) not in tree]
        edges = tree + chords[:2]
    else:
        if len(induced) < size + 1:
            return None
        edges = induced
    return Query.build([(i, int(labels[chosen[i]])) for i in range(size)],
                       [(a, b, 0) for a, b in edges])


def generate(cfg: GenConfig) -> Dataset:
    rng = np.random.default_rng(cfg.seed)
    src, dst = _power_law_edges(cfg, rng)
    share = 1.0 / np.arange(1, cfg.labels + 1)
    labels = rng.choice(cfg.labels, cfg.vertices, p=share / share.sum()).astype(np.int32)
    elab = rng.integers(0, cfg.edge_labels, len(src)).astype(np.int32)
    vids = np.arange(cfg.vertices, dtype=np.int64)
    graph = GraphData(vids, labels, src, dst, elab)

    m = len(src)
    order = rng.permutation(m)
    n_ins = int(round(cfg.insert_ratio * m))
    n_del = int(round(cfg.delete_ratio * m))
    ins, dels = order[:n_ins], order[n_ins:n_ins + n_del]
    keep = np.ones(m, bool)
    keep[ins] = False
    initial = GraphData(vids, labels, src[keep], dst[keep], elab[keep])
    ops = np.concatenate([np.full(n_ins, UpdateOp.INSERT_EDGE), np.full(n_del,
                                                                        UpdateOp.DELETE_EDGE)])
    idx = np.concatenate([ins, dels])
    arrival = rng.permutation(len(idx))
    ops, idx = ops[arrival], idx[arrival]
    flip = rng.random(len(idx)) < 0.5
    s = np.where(flip, dst[idx], src[idx])
    d = np.where(flip, src[idx], dst[idx])
    stream = UpdateBatch.build(np.arange(len(idx)), ops, s, d, elab[idx])

    # queries are grown in the final graph
    a = np.concatenate([src, dst])
    b = np.concatenate([dst, src])
    o = np.argsort(a, kind="stable")
    indptr = np.zeros(cfg.vertices + 1, np.int64)
    np.cumsum(np.bincount(a, minlength=cfg.vertices), out=indptr[1:])
    nbrs = b[o]
    edge_set = set(zip(np.minimum(src, dst).tolist(), np.maximum(src, dst).tolist(),
                       strict=True))
    queries: list[tuple[str, Query]] = []
    attempts = 0
    while len(queries) < cfg.queries and attempts < 200 * max(cfg.queries, 1):
        attempts += 1
        shape = SHAPES[len(queries) % len(SHAPES)]
        size = int(rng.integers(cfg.min_query, cfg.max_query + 1))
        q = _grow_query(rng, indptr, nbrs, edge_set, labels, size, shape)
        if q is not None:
            queries.append((shape, q))
    return Dataset(graph=graph, initial=initial, stream=stream, queries=tuple(queries))


def write_dataset(ds: Dataset, out: str | Path) -> dict[str, Path]:
    """CSM-format files: data/initial graph, stream, and queries/query_<i>_<shape>.graph."""
    out = Path(out)
    (out / "queries").mkdir(parents=True, exist_ok=True)
    paths = {"data": out / "data_graph.graph", "initial": out / "initial_graph.graph",
             "stream": out / "stream.graph"}
    with paths["data"].open("w") as f:
        csm.write_graph(f, ds.graph)
    with paths["initial"].open("w") as f:
        csm.write_graph(f, ds.initial)
    with paths["stream"].open("w") as f:
        csm.write_stream(f, ds.stream)
    for i, (shape, q) in enumerate(ds.queries):
        p = out / "queries" / f"query_{i}_{shape}.graph"
        with p.open("w") as f:
            csm.write_query(f, q)
        paths[f"query_{i}"] = p
    return paths
