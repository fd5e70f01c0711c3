"""Where the response-time tail comes from: the latency section's replay (gpu_bench.py) at
a few rates, with the pool's stream-ordered compactions logged (host time enqueued, device
time from the end of the lanes' work before them to their end) and the slow updates
matched to them; graph captures and collector passes counted beside them.

    CSM_BENCH_DEVICE_GRAPH=1 python bench/latency_tail.py [--rates 1e5,3e5] [--load-room 16,256]

``--load-room`` runs each rate once per value of the pool's room at load (LOAD_ROOM,
times the loaded graph's entries): a larger room means fewer compactions on the same
stream, which tells the compactions' share of the tail from the rest.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _harness import engine  # noqa: E402
from gpu_bench import _big_dataset, _serve, collector_passes  # noqa: E402

from gpu import CountMode, warm_up  # noqa: E402
from gpu.cuda import _updater  # noqa: E402

_dataset = functools.cache(_big_dataset)


def _logged(upd: _updater.DeviceUpdater, log: list) -> None:
    """Wraps the updater's compaction: enqueue time on the host, an event at its start
    (after the waits for the lanes) and the event it returns."""
    inner = upd.compact_in_stream

    def compact(capacity: int = 0):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        start = upd.stream.record()
        done = inner(capacity)
        log.append((t, start, done, upd.pool_capacity))
        return done

    upd.compact_in_stream = compact  # type: ignore[method-assign]


@functools.cache
def _spin():  # type: ignore[no-untyped-def]
    import cupy
    return cupy.RawKernel(r"""
extern "C" __global__ void spin(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}""", "spin")


def _parts(upd: _updater.DeviceUpdater, reps: int = 3) -> str:
    """Compactions on the drained engine, each timed in parts (device ms: the prefix sums,
    the pack kernel, the rest; host ms of the call)."""
    import cupy
    marks: list = []
    pack = upd._pack

    def timed_pack(*a, **k):  # type: ignore[no-untyped-def]
        marks.append(upd.stream.record())
        pack(*a, **k)
        marks.append(upd.stream.record())

    upd._pack = timed_pack  # type: ignore[method-assign]
    out = []
    for _ in range(reps):
        cupy.cuda.Device().synchronize()
        marks.clear()
        with upd.stream:   # the device busy while the host queues it: device times only
            _spin()((1,), (1,), (np.uint64(5_000_000),))
        t = time.perf_counter()
        start = upd.stream.record()
        done = upd.compact_in_stream()
        host = time.perf_counter() - t
        done.synchronize()
        ms = [cupy.cuda.get_elapsed_time(a, b) for a, b in
              ((start, marks[0]), (marks[0], marks[1]), (marks[1], done))]
        out.append(" / ".join(f"{x:.3f}" for x in ms) + f" (host {host * 1e3:.3f})")
    upd._pack = pack  # type: ignore[method-assign]
    return f"vertices {upd._vcap:,}, pool {upd.pool_capacity:,}: " + "; ".join(out)


def run(rate: float, count: int, room: int, max_query: int) -> str:
    _updater.LOAD_ROOM = room
    _, ds = _dataset(1_200_000, max_query)
    eng = engine("gpu", ds.initial, [q for _, q in ds.queries], CountMode.EMBEDDINGS)
    upd = eng.executor._pipeline.updater  # type: ignore[attr-defined]
    log: list = []
    _logged(upd, log)
    n = int(min(count, max(2000, rate * 2.0)))
    rng = np.random.default_rng(1)
    arr = np.cumsum(rng.exponential(1 / rate, n))
    arr -= arr[0]
    pipe = eng.executor._pipeline  # type: ignore[attr-defined]
    captures = pipe.captures
    t0 = time.perf_counter()
    with collector_passes() as passes:
        rt, _ = _serve(eng, ds.stream.slice(0, n), arr, 64, 0.125e-3)
    import cupy
    cupy.cuda.Device().synchronize()
    took = [cupy.cuda.get_elapsed_time(s, done) for _, s, done, _ in log]
    at = np.array([t - t0 for t, *_ in log])
    slow = rt > 1e-3
    # a slow update "meets" a compaction enqueued between its arrival and its answer
    met = np.zeros(n, bool)
    for a in at:
        met |= (arr <= a) & (a <= arr + rt)
    captures = pipe.captures - captures
    pipe.drain()
    print("compactions on the drained engine, ms (prefix / pack / rest):", _parts(upd),
          flush=True)
    q = np.percentile(rt, [50, 99, 99.9]) * 1e3
    return (f"| {rate:,.0f} | {room} | {n:,} | {q[0]:.3f} | {q[1]:.3f} | {q[2]:.3f} | "
            f"{slow.sum()} | {(slow & met).sum()} | {len(log)} | "
            f"{np.median(took) if took else 0:.3f} | {max(took) if took else 0:.3f} | "
            f"{upd.pool_capacity:,} | {captures} | {len(passes)} | "
            f"{max((x.seconds for x in passes), default=0) * 1e3:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="1e5,3e5")
    ap.add_argument("--load-room", default="16,256")
    ap.add_argument("--count", type=int, default=20_000)
    ap.add_argument("--max-query", default="3", help="query sizes up to 3 or 5 (comma-separated)")
    args = ap.parse_args()
    warm_up("gpu")
    print("| rate | room | updates | p50 (ms) | p99 | p99.9 | over 1 ms | of them beside a "
          "compaction | compactions | compaction median (ms) | max | pool | graph captures | "
          "gc passes | longest (ms) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for mq in (int(x) for x in args.max_query.split(",")):
        for rate in (float(x) for x in args.rates.split(",")):
            for room in (int(x) for x in args.load_room.split(",")):
                print(run(rate, args.count, room, mq), flush=True)


if __name__ == "__main__":
    main()
