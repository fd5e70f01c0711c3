"""Where the device resolver's time goes, phase by phase (a diagnostic build).

Compiles kernels/update.cu with its timing probes (CSM_CUDA_PROBES=1): thread 0 of the
resolver's block 0 adds the nanoseconds between marks to the grid's words. Prints, for a
few workloads on the device pipeline, the microseconds per launch (per tile for the tile
phases) of each phase: reading the control block, the meta words, the tile front's steps,
the grid barriers with the version builds, the tail. The probes serialise nothing; their
own cost is a few global stores per mark.

    python bench/probe_resolver.py [--enron DIR]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["CSM_CUDA_PROBES"] = "1"   # before the kernels compile
os.environ.setdefault("CSM_BENCH_DEVICE_GRAPH", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _harness import engine  # noqa: E402
from gpu_bench import _window  # noqa: E402

from gpu import CountMode  # noqa: E402
from gpu.cuda._updater import P_MAX, W_BST, W_PROBE  # noqa: E402
from streams import iter_chunks, read_graph, read_query, read_stream  # noqa: E402

#: kernels/update.cu's P_* marks, in order: what ends at each
PHASES = ("entry 3: the stall flag, the barrier", "raw updates from the control block",
          "load_meta", "front 1: new vertices, pool bound", "front 2: bitonic sort",
          "front 3: pair replay", "front 4: ticks, lifetimes",
          "front 5b: entries into buckets (block 0)",
          "front 6: output rows", "sequential resolver (vertex ops)", "barrier after front",
          "sort_and_count + barrier", "build_chunk + barrier", "last front check + barrier",
          "tail: publish, store_meta", "entry 1: mapped words arrived",
          "entry 2: lane ticks (device)", "front 5a: owners' space and items",
          "front 5c: entries into buckets (grid) + barrier",
          "front 5d: owners' space and items (grid) + two barriers",
          "launch front 1: ends, bound, pairs + barrier",
          "launch front 2: ranks, replays + barrier", "launch front 3: verdict, ids + barrier",
          "launch front 4: ticks, entries, rows + barrier")


def _reset(upd: object) -> None:
    gw = upd._tiles["gw"]  # type: ignore[attr-defined]
    gw[W_PROBE:W_PROBE + 2 * P_MAX + 1] = 0
    gw[W_BST:W_BST + 8] = 0


def _report(title: str, upd: object) -> None:
    gw = upd._tiles["gw"].get()  # type: ignore[attr-defined]
    sums, counts = gw[W_PROBE:W_PROBE + P_MAX], gw[W_PROBE + P_MAX:W_PROBE + 2 * P_MAX]
    launches = max(int(counts[PHASES.index("load_meta")]), 1)   # one mark a launch
    total = sums[:len(PHASES)].sum() / 1e3
    print(f"== {title}: {launches} launches, {total / launches:.1f} us a launch "
          f"(block 0, entry to tail)")
    for k, name in enumerate(PHASES):
        if counts[k]:
            print(f"  {name:38s} {sums[k] / 1e3 / launches:9.2f} us a launch "
                  f"({counts[k] / launches:.2f} marks a launch, "
                  f"{sums[k] / counts[k] / 1e3:.2f} us each)")
    b = gw[W_BST:W_BST + 8]
    if b[4]:   # the build's items: warps' time in each phase, the slowest item
        slow = int(b[6])
        print(f"  items {int(b[4]) / launches:.0f} a launch; "
              f"warp us in sort_and_count sum {b[0] / 1e3:.0f} "
              f"max {b[2] / 1e3:.1f}, in build_chunk sum {b[1] / 1e3:.0f} max {b[3] / 1e3:.1f}; "
              f"slowest item {(slow >> 32) / 1e3:.1f} us (k {(slow >> 16) & 0xffff}, "
              f"chunks {slow & 0xffff})")
    _reset(upd)


def _updater(eng: object) -> object:
    return eng.executor._pipeline.updater  # type: ignore[attr-defined]


def one_at_a_time(title: str, graph: object, queries: list, stream: object, b: int) -> None:  # type: ignore[type-arg]
    eng = engine("gpu", graph, queries, CountMode.EMBEDDINGS)  # type: ignore[arg-type]
    chunks = list(iter_chunks(stream, b))  # type: ignore[arg-type]
    for c in chunks[:20]:
        eng.apply(c)
    _reset(_updater(eng))
    for c in chunks[20:20 + 1000]:
        eng.apply(c)
    _report(title, _updater(eng))


def all_at_once(title: str, graph: object, queries: list, stream: object, b: int) -> None:  # type: ignore[type-arg]
    eng = engine("gpu", graph, queries, CountMode.EMBEDDINGS)  # type: ignore[arg-type]
    for p in [eng.submit(c) for c in iter_chunks(stream, b)]:  # type: ignore[arg-type]
        p.result()
    _report(title, _updater(eng))


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--enron":
        d = Path(sys.argv[2])
        graph = read_graph(d / "initial_graph.graph")
        q = read_query(d / "query_graph-0.graph")
        for name in ("insertion", "deletion"):
            stream = read_stream(d / f"{name}_graph.graph")
            for b in (len(stream), 4096, 64):
                all_at_once(f"Enron q0 {name}, b={b}, pipelined", graph, [q], stream, b)
        return
    ds, qs, stream = _window(1_200_000, 20_000)
    tri = [q for q in qs if q.n == 3]
    for b in (1, 8, 64, 512):
        one_at_a_time(f"generated, triangles, b={b}, one at a time", ds.initial, tri, stream, b)
    for b in (8, 64):
        all_at_once(f"generated, triangles, b={b}, all submitted at once", ds.initial, tri,
                    stream, b)


if __name__ == "__main__":
    main()
