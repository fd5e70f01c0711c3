"""Enron insertion runs of queries 0, 1 and 5 at b=64 and as one batch, minimum of 3 fresh
engines each: a short A/B of two checkouts on one machine instance, where small-batch
figures vary between instances (run it from each checkout in turn, several rounds:
``scripts/gpu-check.sh ab``). Imports the checkout in the working directory.

    CSM_BENCH_DEVICE_GRAPH=1 ENRON=.local-data/enron-labeled python bench/enron_ab.py

QUERIES (default 0,1,5) and BATCHES (default 64,all) choose the runs; LAUNCH_CAP, where
set, replaces the pipeline's launch capacity (an A/B of one tree).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# the checkout in the working directory, not this file's: scripts/gpu-check.sh ab runs
# this file against an older checkout too
sys.path.insert(0, str(Path.cwd() / "bench"))
sys.path.insert(0, str(Path.cwd()))

from _harness import launch_cap_from_env, time_run  # noqa: E402

from gpu import CountMode  # noqa: E402
from streams import read_graph, read_query, read_stream  # noqa: E402


def main() -> None:
    launch_cap_from_env()
    d = Path(os.environ.get("ENRON", ".local-data/enron-labeled"))
    graph, stream = read_graph(d / "initial_graph.graph"), read_stream(d / "insertion_graph.graph")
    queries = [int(x) for x in os.environ.get("QUERIES", "0,1,5").split(",")]
    sizes = [len(stream) if x == "all" else int(x)
             for x in os.environ.get("BATCHES", "64,all").split(",")]
    for i in queries:
        q = read_query(d / f"query_graph-{i}.graph")
        for b in sizes:
            t, pos, _ = time_run("gpu", graph, [q], stream, CountMode.EMBEDDINGS, 3, b)
            sys.stdout.write(f"query {i} b={b}: {t * 1e3:.2f} ms, +{pos:,}\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
