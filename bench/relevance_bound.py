"""How far a RapidFlow-like store could take the CPU engine on Enron (issue 20, round 7).

RapidFlow keeps, per query, only the edges whose (end label, edge label, end label) is a
query edge's, and skips every other update after one lookup: no graph write, no status.
This engine keeps the whole graph with exact statuses, so every update touches it. The
bound here: per query, the engine on the relevant updates alone (the same matches, since
the others never reach a label range the query reads) plus one probe of an edge set per
other update, against the engine on the whole stream, each the minimum of ``--repeat``
fresh engines. Threads: numba's default (``NUMBA_NUM_THREADS``).

    python bench/relevance_bound.py [--data .local-data] [--repeat 5] [--queries 0,1,2,3,4]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numba as nb
import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _harness import engine  # noqa: E402

from gpu import CountMode, Query, UpdateBatch  # noqa: E402
from gpu._engine import warm_up  # noqa: E402
from gpu.graph._idmap import _hash  # noqa: E402
from streams import GraphData, read_graph, read_query, read_stream  # noqa: E402

SCENARIOS = (("insert", "initial_graph.graph", "insertion_graph.graph"),
             ("delete", "data_graph.graph", "deletion_graph.graph"))


@nb.njit(cache=True, nogil=True)
def _edge_set(src, dst, slots):  # type: ignore[no-untyped-def]
    """Open-addressing set of the canonical pairs of a graph's edges."""
    h = np.full(slots, -1, np.int64)
    m = np.uint64(slots - 1)
    for i in range(len(src)):
        p = (min(src[i], dst[i]) << 32) | max(src[i], dst[i])
        s = _hash(p) & m
        while h[s] != -1 and h[s] != p:
            s = (s + np.uint64(1)) & m
        h[s] = p
    return h


@nb.njit(cache=True, nogil=True)
def _probe_others(h, op, src, dst, relevant, status):  # type: ignore[no-untyped-def]
    """Each update not in ``relevant`` resolved against the edge set (found: an insertion
    is ignored, a deletion applied), the set updated as it goes."""
    m = np.uint64(len(h) - 1)
    for i in range(len(op)):
        if relevant[i]:
            continue
        p = (min(src[i], dst[i]) << 32) | max(src[i], dst[i])
        s = _hash(p) & m
        while h[s] != -1 and h[s] != p:
            s = (s + np.uint64(1)) & m
        found = h[s] == p
        status[i] = found == (op[i] == 0)
        if op[i] == 0 and not found:
            h[s] = p
        elif op[i] != 0 and found:
            h[s] = -2   # a tombstone: probes go on past it


def _relevant(q: Query, labels: npt.NDArray[np.int32],
              stream: UpdateBatch) -> npt.NDArray[np.bool_]:
    """Updates whose end labels are those of some query edge (Enron's edges all carry 0)."""
    ql = q.vertex_labels
    pairs = {(min(ql[a], ql[b]), max(ql[a], ql[b])) for a, b, _ in q.edges}
    la, lb = labels[stream.src], labels[stream.dst]
    lo, hi = np.minimum(la, lb), np.maximum(la, lb)
    out = np.zeros(len(stream), np.bool_)
    for x, y in pairs:
        out |= (lo == x) & (hi == y)
    return out


def _run(graph: GraphData, q: Query, stream: UpdateBatch, repeat: int) -> tuple[float, int]:
    best, n = float("inf"), 0
    for _ in range(repeat):
        eng = engine("cpu", graph, [q], CountMode.EMBEDDINGS)
        t = time.perf_counter()
        r = eng.submit(stream).result()
        best = min(best, time.perf_counter() - t)
        n = r.stats.positive + r.stats.negative
    return best, n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=ROOT / ".local-data")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--queries", default="0,1,2,3,4,5,6,7")
    args = ap.parse_args()
    d = args.data / "enron-labeled"
    warm_up("cpu")
    print("| scenario | query | relevant updates | whole stream ms | relevant only ms | "
          "probes of the others ms | bound ms |\n|---|---|---|---|---|---|---|")
    for name, g, u in SCENARIOS:
        graph, stream = read_graph(d / g), read_stream(d / u)
        top = int(max(graph.vertex_ids.max(), stream.src.max(), stream.dst.max())) + 1
        labels = np.zeros(top, np.int32)   # an unknown vertex gets label 0
        labels[graph.vertex_ids] = graph.vertex_labels
        for i in (int(x) for x in args.queries.split(",")):
            q = read_query(d / f"query_graph-{i}.graph")
            rel = _relevant(q, labels, stream)
            idx = np.flatnonzero(rel)
            sub = UpdateBatch.build(stream.seq[idx], stream.op[idx], stream.src[idx],
                                    stream.dst[idx], stream.label[idx])
            probe = float("inf")
            for r in range(args.repeat + 1):   # the first compiles or loads the kernels
                h = _edge_set(graph.src, graph.dst, 1 << 20)
                st = np.zeros(len(stream), np.bool_)
                t = time.perf_counter()
                _probe_others(h, stream.op, stream.src, stream.dst, rel, st)
                if r:
                    probe = min(probe, time.perf_counter() - t)
            whole, n_whole = _run(graph, q, stream, args.repeat)
            part, n_part = _run(graph, q, sub, args.repeat)
            assert n_whole == n_part, (n_whole, n_part)
            print(f"| {name} | {i} | {len(idx):,} of {len(stream):,} | {whole * 1e3:.2f} | "
                  f"{part * 1e3:.2f} | {probe * 1e3:.2f} | {(part + probe) * 1e3:.2f} |",
                  flush=True)


if __name__ == "__main__":
    main()
