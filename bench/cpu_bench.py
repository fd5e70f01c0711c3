"""CPU executor benchmark: Yeast insertion/deletion (queries 0-19, embeddings) and a
generated power-law stream. Writes docs/benchmarks.md (section "CPU executor").

    python bench/cpu_bench.py [--yeast DIR] [--repeat 3] [--out docs/benchmarks.md]

Times are update processing only (``Engine.apply``: graph update + matching), the
minimum over ``--repeat`` runs, each query on a freshly loaded engine, as RapidFlow's
reference (0.75 s for the 20 insertion runs, single thread, 2-core machine) is measured.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _harness import time_run, write_section  # noqa: E402

from gpu import CountMode  # noqa: E402
from streams import GenConfig, generate, read_graph, read_query, read_stream  # noqa: E402

RAPIDFLOW_INSERT_SECONDS = 0.75
BEGIN, END = "<!-- cpu-bench:begin -->", "<!-- cpu-bench:end -->"


def _machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import numba
    return (f"{cpu}, {os.cpu_count()} cores, numba {numba.__version__} with "
            f"{numba.get_num_threads()} threads, Python {platform.python_version()}")


def yeast(d: Path, repeat: int) -> list[str]:
    qs = [read_query(d / "query_graphs" / f"query_graph-{i}.graph") for i in range(20)]
    rows = ["| scenario | updates | embeddings (+/-) | seconds, 20 runs | updates/s | "
            "vs RapidFlow 0.75 s |", "|---|---|---|---|---|---|"]
    for name, g, s in (("insertion", "initial_graph.graph", "insertion_graph.graph"),
                       ("deletion", "data_graph.graph", "deletion_graph.graph")):
        graph, stream = read_graph(d / g), read_stream(d / s)
        total, pos, neg = 0.0, 0, 0
        for q in qs:
            t, p, n = time_run("cpu", graph, [q], stream, CountMode.EMBEDDINGS, repeat, len(stream))
            total, pos, neg = total + t, pos + p, neg + n
        ratio = RAPIDFLOW_INSERT_SECONDS / total
        rows.append(f"| {name} | {len(stream):,} x 20 | +{pos:,} / -{neg:,} | {total:.3f} | "
                    f"{20 * len(stream) / total:,.0f} | {ratio:.2f}x |")
        print(rows[-1], flush=True)
    graph = read_graph(d / "initial_graph.graph")
    stream = read_stream(d / "insertion_graph.graph")
    t, p, _ = time_run("cpu", graph, qs, stream, CountMode.EMBEDDINGS, repeat, 64)
    rows.append(f"| insertion, all 20 queries standing at once, batches of 64 | "
                f"{len(stream):,} | +{p:,} | {t:.3f} | {len(stream) / t:,.0f} | "
                f"{RAPIDFLOW_INSERT_SECONDS / t:.2f}x |")
    print(rows[-1], flush=True)
    return rows


def generated(repeat: int) -> list[str]:
    cfg = GenConfig(vertices=100_000, edges=500_000, queries=6, insert_ratio=0.1,
                    delete_ratio=0.02, seed=7)
    ds = generate(cfg)
    rows = [f"Generated: `GenConfig(vertices={cfg.vertices}, edges={cfg.edges}, labels="
            f"{cfg.labels}, queries={cfg.queries}, insert_ratio={cfg.insert_ratio}, "
            f"delete_ratio={cfg.delete_ratio}, seed={cfg.seed})`, all queries standing at "
            "once, subgraphs mode, one run each.", "",
            "| batch size | updates | matches (+/-) | seconds | updates/s |",
            "|---|---|---|---|---|"]
    for batch in (64, 1024):
        t, p, n = time_run("cpu", ds.initial, [q for _, q in ds.queries], ds.stream,
                            CountMode.SUBGRAPHS, 1, batch)
        rows.append(f"| {batch} | {len(ds.stream):,} | +{p:,} / -{n:,} | {t:.3f} | "
                    f"{len(ds.stream) / t:,.0f} |")
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--yeast", type=Path,
                    default=ROOT.parent / "shared" / "data" / "divine-yeast-hprd" / "Yeast")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    args = ap.parse_args()
    # warm the numba cache so compile time is not measured
    time_run("cpu", generate(GenConfig(vertices=200, edges=600, queries=2, seed=1)).initial,
              [], generate(GenConfig(vertices=200, edges=600, seed=1)).stream,
              CountMode.EMBEDDINGS, 1, 64)
    lines = ["## CPU executor", "",
             f"Command: `python bench/cpu_bench.py --repeat {args.repeat}`  ",
             f"Machine: {_machine()}  ", f"Date: {time.strftime('%Y-%m-%d')}", ""]
    if (args.yeast / "initial_graph.graph").exists():
        lines += ["Yeast (DIVINE artifact), queries 0-19, embeddings mode, whole stream as "
                  "one batch per run, minimum of the repeats. RapidFlow reference: 0.75 s for "
                  "the 20 insertion runs, single-threaded, 2-core machine; the ratio is "
                  "RapidFlow time / ours (>1 = faster than RapidFlow).", ""]
        lines += yeast(args.yeast, args.repeat)
    else:
        lines += [f"Yeast data not found at {args.yeast}; skipped."]
    lines += ["", *generated(args.repeat)]
    write_section(args.out, BEGIN, END, lines)


if __name__ == "__main__":
    main()
