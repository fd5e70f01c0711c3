"""When each launch of a one-batch Enron run does what: per launch, milliseconds from the
run's first event to the start and end of apply_step, the end of build_units (updater
stream), and the ends of match_step and the count collection (the launch's lane). The
kernels run uncaptured with events between them (the pipeline's timed mode), so the
figures show waits for SMs and for the host, not only kernel time.

    CSM_BENCH_DEVICE_GRAPH=1 python bench/launch_timeline.py --enron DIR [QUERIES]

QUERIES: comma-separated Enron query numbers (default 0,5,7); two fresh engines each.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _harness import engine, launch_cap_from_env  # noqa: E402

from gpu import CountMode, warm_up  # noqa: E402
from streams import read_graph, read_query, read_stream  # noqa: E402


def main() -> None:
    launch_cap_from_env()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--enron", type=Path, required=True, help="the enron-labeled folder")
    ap.add_argument("queries", nargs="?", default="0,5,7")
    args = ap.parse_args()
    warm_up("gpu")
    d = args.enron
    graph, stream = read_graph(d / "initial_graph.graph"), read_stream(d / "insertion_graph.graph")
    for qi in args.queries.split(","):
        q = read_query(d / f"query_graph-{qi}.graph")
        for rep in range(2):
            eng = engine("gpu", graph, [q], CountMode.EMBEDDINGS, True)
            pipe = eng.executor._pipeline  # type: ignore[attr-defined]
            pipe.timed = True
            t = time.perf_counter()
            pending = eng.submit(stream)
            pending.result()
            wall = (time.perf_counter() - t) * 1e3
            ticket = pending.ticket
            parts = getattr(ticket, "parts", [ticket])
            first = parts[0].launch.marks[0]
            lanes = ",".join(str(p.launch.block.lane.index) for p in parts)
            print(f"q{qi} run {rep}: {wall:.2f} ms wall, {len(parts)} launches on lanes {lanes}"
                  " (ms: apply start, apply end, units end, match end, collect end)")
            for i, p in enumerate(parts):
                ms = [pipe.cp.cuda.get_elapsed_time(first, m) for m in p.launch.marks]
                print(f"  launch {i}: " + " ".join(f"{v:7.3f}" for v in ms))


if __name__ == "__main__":
    main()
