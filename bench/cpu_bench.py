"""CPU executor benchmark against RapidFlow, per query and scenario, on real labelled graphs
(Enron with hubs, Yeast, HPRD), and a generated power-law stream. Writes docs/benchmarks.md
(section "CPU executor").

    python bench/cpu_bench.py [--data DIR] [--repeat 3] [--sections enron,yeast,hprd,generated]
                              [--rapidflow BINARY]

Times are update processing only (``Engine.submit`` to the last result: graph update +
matching), the minimum over ``--repeat`` runs, each query on a freshly loaded engine, as
RapidFlow's reference is measured: the whole stream as one batch, and in batches of 64.
RapidFlow's seconds come from the data set's ``rapidflow_reference.csv`` (Enron, per query)
or, for Yeast, from the 0.75 s total of the 20 insertion runs; HPRD has none. With
``--rapidflow`` (a RapidFlow build, not part of this project), RapidFlow runs here, each
query and scenario just before ours, the minimum of as many runs: the development VM's
speed varies by 2-3x between sessions (its memory latency most), so a reference measured
on another day can be off by that much. The machine line gives the latency of dependent
loads over 8 MiB, to compare sessions by.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _harness import cpu_model, time_run, write_section  # noqa: E402

from gpu import CountMode  # noqa: E402
from gpu._engine import warm_up  # noqa: E402
from streams import GenConfig, generate, read_graph, read_query, read_stream  # noqa: E402

YEAST_RAPIDFLOW_INSERT_SECONDS = 0.75
BEGIN, END = "<!-- cpu-bench:begin -->", "<!-- cpu-bench:end -->"
SCENARIOS = (("insert", "initial_graph.graph", "insertion_graph.graph"),
             ("delete", "data_graph.graph", "deletion_graph.graph"))
BATCHES = (0, 64)   # 0: the whole stream as one batch


def _machine() -> str:
    import numba
    return (f"{cpu_model()}, {os.cpu_count()} cores, numba {numba.__version__} with "
            f"{numba.get_num_threads()} threads, Python {platform.python_version()}; "
            f"dependent loads over 8 MiB {_load_latency_ns():.0f} ns")


def _load_latency_ns(nbytes: int = 8 << 20, steps: int = 2_000_000) -> float:
    """Nanoseconds per dependent load over a random cycle of ``nbytes``: the figure the
    host graph's updates (hash probes) follow, and the one that moves between sessions."""
    import numba
    import numpy as np

    @numba.njit(nogil=True)
    def chase(nxt, steps):  # type: ignore[no-untyped-def]
        i = 0
        for _ in range(steps):
            i = nxt[i]
        return i

    n = nbytes // 8
    perm = np.random.default_rng(0).permutation(n)
    nxt = np.empty(n, np.int64)
    nxt[perm] = np.roll(perm, 1)
    chase(nxt, 10)
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        chase(nxt, steps)
        best = min(best, time.perf_counter() - t)
    return best / steps * 1e9


def rapidflow_seconds(binary: Path, root: Path, graph: str, query: Path, updates: str,
                      repeat: int) -> float:
    """RapidFlow's own "Query time (seconds)" (update processing), minimum of ``repeat``
    runs of ``binary`` on the data set at ``root``."""
    best = float("inf")
    for _ in range(repeat):
        out = subprocess.run([str(binary), "-d", str(root / graph), "-q", str(query), "-u",
                              str(root / updates), "-num", "MAX", "-time_limit", "300"],
                             capture_output=True, text=True, check=True).stdout
        m = re.search(r"Query time \(seconds\): ([0-9.eE+-]+)", out)
        if m is None:
            raise RuntimeError(f"{binary} printed no query time for {query}: {out[-300:]!r}")
        best = min(best, float(m[1]))
    return best


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    root: Path
    queries: list[Path]
    #: (query index, scenario) -> RapidFlow seconds
    reference: dict[tuple[int, str], float]


def _reference(path: Path) -> dict[tuple[int, str], float]:
    if not path.exists():
        return {}
    with path.open() as fh:
        return {(int(r["query"]), r["scenario"]): float(r["rapidflow_seconds"])
                for r in csv.DictReader(fh)}


def _ratio(ref: float | None, ours: float) -> str:
    return "n/a" if ref is None else f"{ref / ours:.2f}x"


def _ref(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4f}"


def run_workload(w: Workload, repeat: int, rapidflow: Path | None = None) -> list[str]:
    """One row per query: ours (one batch, b=64) against RapidFlow (its reference, or run
    here just before ours with ``rapidflow``), both scenarios."""
    head = ["| query | matches (+/-) |"
            + "".join(f" {s}: ours, one batch | {s}: ours, b=64 | {s}: RapidFlow | "
                      f"{s}: ratio | {s}: ratio b=64 |" for s, _, _ in SCENARIOS),
            "|---|---|" + "---|" * 5 * len(SCENARIOS)]
    graphs = {s: (read_graph(w.root / g), read_stream(w.root / u)) for s, g, u in SCENARIOS}
    totals = {(s, b): 0.0 for s, _, _ in SCENARIOS for b in BATCHES}
    ref_tot = {s: 0.0 for s, _, _ in SCENARIOS}
    rows = []
    for i, qpath in enumerate(w.queries):
        q = read_query(qpath)
        cells, counts = [], ""
        for s, gfile, ufile in SCENARIOS:
            graph, stream = graphs[s]
            ref = (rapidflow_seconds(rapidflow, w.root, gfile, qpath, ufile, repeat)
                   if rapidflow is not None else w.reference.get((i, s)))
            secs = {}
            for b in BATCHES:
                t, pos, neg = time_run("cpu", graph, [q], stream, CountMode.EMBEDDINGS, repeat,
                                       b or len(stream))
                secs[b] = t
                totals[s, b] += t
            if s == "insert":
                counts = f"+{pos:,}"
            else:
                counts += f" / -{neg:,}"
            if ref is not None:
                ref_tot[s] += ref
            cells += [f"{secs[0]:.4f}", f"{secs[64]:.4f}", _ref(ref), _ratio(ref, secs[0]),
                      _ratio(ref, secs[64])]
        rows.append(f"| {i} | {counts} | " + " | ".join(cells) + " |")
        print(w.name, rows[-1], flush=True)
    tot = []
    for s, _, _ in SCENARIOS:
        ref = ref_tot[s] if w.reference or rapidflow is not None else None
        if w.name == "Yeast" and s == "insert" and rapidflow is None:
            ref = YEAST_RAPIDFLOW_INSERT_SECONDS
        tot += [f"{totals[s, 0]:.3f}", f"{totals[s, 64]:.3f}", _ref(ref),
                _ratio(ref, totals[s, 0]), _ratio(ref, totals[s, 64])]
    rows.append("| **total** | | " + " | ".join(f"**{c}**" for c in tot) + " |")
    print(w.name, rows[-1], flush=True)
    return head + rows


def generated() -> list[str]:
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
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data",
                    help="folder holding enron-labeled/ and divine-yeast-hprd/")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rapidflow", type=Path, default=None,
                    help="a RapidFlow binary to run here beside ours (else its reference)")
    ap.add_argument("--sections", default="enron,yeast,hprd,generated")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    args = ap.parse_args()
    sections = set(args.sections.split(","))
    warm_up("cpu")   # compile (or load) every kernel first: no timing includes it
    enron = args.data / "enron-labeled"
    dh = args.data / "divine-yeast-hprd"
    loads = [
        ("enron", Workload("Enron", enron, [enron / f"query_graph-{i}.graph" for i in range(8)],
                           _reference(enron / "rapidflow_reference.csv"))),
        ("yeast", Workload("Yeast", dh / "Yeast", [dh / "Yeast" / "query_graphs" /
                                                   f"query_graph-{i}.graph" for i in range(20)],
                           {})),
        ("hprd", Workload("HPRD", dh / "HPRD", [dh / "HPRD" / "query_graphs" /
                                                f"query_graph-{i}.graph" for i in range(20)], {})),
    ]
    lines = ["## CPU executor", "",
             f"Command: `python bench/cpu_bench.py --repeat {args.repeat} --sections "
             f"{args.sections}" + (" --rapidflow BINARY" if args.rapidflow else "")
             + "`  ", f"Machine: {_machine()}  ",
             f"Date: {time.strftime('%Y-%m-%d')}", "",
             "Embeddings mode, each query on a freshly loaded engine, update processing only, "
             "minimum of the repeats; the whole stream as one batch and in batches of 64. "
             "Ratio = RapidFlow seconds / ours (>1: faster than RapidFlow). RapidFlow: "
             "single-threaded, " + ("run here just before ours, the minimum of as many runs."
                                    if args.rapidflow else
                                    "the same 2-core machine type (Enron: per query, from "
                                    "`rapidflow_reference.csv`; Yeast: 0.75 s for the 20 "
                                    "insertion runs, no per-query figure; HPRD: no "
                                    "reference)."), ""]
    for key, w in loads:
        if key not in sections:
            continue
        if not (w.root / "initial_graph.graph").exists():
            lines += [f"{w.name}: data not found at {w.root}; skipped.", ""]
            continue
        lines += [f"### {w.name}", "", *run_workload(w, args.repeat, args.rapidflow), ""]
    if "generated" in sections:
        lines += ["### Generated power-law stream", "", *generated()]
    write_section(args.out, BEGIN, END, lines)


if __name__ == "__main__":
    main()
