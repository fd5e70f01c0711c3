"""Profile one Enron run's compiled code with Linux perf: only the timed part is recorded,
and numba's functions get names.

cProfile sees a compiled call as one line and perf sees numba's code as anonymous
addresses; this script records just the submits (perf's control fifo, enabled around
them, not the graph's load) and writes ``/tmp/perf-<pid>.map`` for every compiled
function it can name, so ``perf report`` shows them. Issue 20's round 12 found this way
that 18% of a one-batch run was numba's atomic reference counts inside the updater.

    mkfifo /tmp/pc /tmp/pa
    NUMBA_ENABLE_PROFILING=1 NUMBA_CACHE_DIR=$(mktemp -d) perf record -D -1 \\
        --control fifo:/tmp/pc,/tmp/pa -F 20000 -o /tmp/p.data \\
        python bench/perf_jit.py --enron DIR --query 0 --runs 40 --ctl /tmp/pc,/tmp/pa
    perf report -i /tmp/p.data --no-children --sort sym

A fresh ``NUMBA_CACHE_DIR`` compiles everything, so the functions numba inlined into
others are named too (from a cache only each dispatcher's entry is). numba's
``NRT_incref`` / ``NRT_decref`` are one copy for the process: when they show up, the
samples just before them in ``perf script -F tid,time,ip`` say which function calls them.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _harness import engine  # noqa: E402

from gpu import CountMode, warm_up  # noqa: E402
from streams import iter_chunks, read_graph, read_query, read_stream  # noqa: E402


def _symbols() -> list[tuple[int, str]]:
    """(address, name) of every compiled function of the live dispatchers."""
    from numba.core.registry import CPUDispatcher

    out = []
    for obj in gc.get_objects():
        if not isinstance(obj, CPUDispatcher):
            continue
        for cres in obj.overloads.values():
            lib, name = cres.library, f"{obj.py_func.__module__}.{obj.py_func.__qualname__}"
            try:
                inner = [f.name for f in lib._final_module.functions if not f.is_declaration]
            except Exception:   # loaded from the cache: no module to list
                inner = []
            for fn in [cres.fndesc.llvm_func_name, *inner]:
                try:
                    addr = lib.get_pointer_to_function(fn)
                except Exception:
                    continue
                if addr:
                    label = name if fn == cres.fndesc.llvm_func_name else f"{name}::{_short(fn)}"
                    out.append((addr, label))
    return sorted(set(out))


def _short(mangled: str) -> str:
    """The dotted name in numba's Itanium-style mangling (``_ZN3gpu5graph8_kernels...``):
    the inner functions of a compiled library named by what they are, not by a suffix."""
    if not mangled.startswith("_ZN"):
        return mangled[-48:]
    i, parts = 3, []
    while i < len(mangled) and mangled[i].isdigit():
        j = i
        while mangled[j].isdigit():
            j += 1
        n = int(mangled[i:j])
        parts.append(mangled[j:j + n])
        i = j + n
    return ".".join(parts) or mangled[-48:]


def _write_map(path: Path, dump: str) -> int:
    """perf's map of JIT code: each function runs to the next one's address. Functions
    whose name ends with ``dump`` also get their code written to /tmp/jit-<addr>.bin, for
    ``objdump -D -b binary -m i386:x86-64 --adjust-vma=0x<addr>`` beside the sampled
    addresses of ``perf script -F ip``."""
    syms = _symbols()
    with path.open("w") as fh:
        for i, (addr, name) in enumerate(syms):
            size = syms[i + 1][0] - addr if i + 1 < len(syms) else 4096
            if 0 < size < 1 << 20:
                fh.write(f"{addr:x} {size:x} {name}\n")
                if dump and name.endswith(dump):
                    Path(f"/tmp/jit-{addr:x}.bin").write_bytes(ctypes.string_at(addr, size))
                    print(f"code of {name}: /tmp/jit-{addr:x}.bin ({size} bytes)")
    return len(syms)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--enron", type=Path, default=Path(".local-data/enron-labeled"))
    ap.add_argument("--query", type=int, default=0)
    ap.add_argument("--scenario", choices=("insertion", "deletion"), default="insertion")
    ap.add_argument("--batch", type=int, default=0, help="updates a batch (0: one batch)")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--ctl", default="", help="perf's control and ack fifos, comma-separated")
    ap.add_argument("--dump", default="", help="write the code of functions named ...DUMP")
    args = ap.parse_args()
    d = args.enron
    graph = read_graph(d / ("initial_graph.graph" if args.scenario == "insertion"
                            else "data_graph.graph"))
    stream = read_stream(d / f"{args.scenario}_graph.graph")
    query = read_query(d / f"query_graph-{args.query}.graph")
    warm_up(args.backend)
    chunks = list(iter_chunks(stream, args.batch or len(stream)))
    ctl = ack = -1
    if args.ctl:
        ctl_path, ack_path = args.ctl.split(",")
        ctl, ack = os.open(ctl_path, os.O_WRONLY), os.open(ack_path, os.O_RDONLY)

    def perf(cmd: bytes) -> None:
        if ctl >= 0:
            os.write(ctl, cmd)
            os.read(ack, 5)

    times = []
    for r in range(args.runs):
        eng = engine(args.backend, graph, [query], CountMode.EMBEDDINGS)
        if r:   # the first run warms the process up
            perf(b"enable\n")
        t = time.perf_counter()
        for c in chunks:
            eng.submit(c).result()
        times.append(time.perf_counter() - t)
        if r:
            perf(b"disable\n")
    times.sort()
    named = _write_map(Path(f"/tmp/perf-{os.getpid()}.map"), args.dump)
    print(f"q{args.query} {args.scenario} b={args.batch or len(stream)}: min "
          f"{times[0] * 1e3:.2f} ms, median {times[len(times) // 2] * 1e3:.2f} ms; "
          f"{named} compiled functions named")


if __name__ == "__main__":
    main()
