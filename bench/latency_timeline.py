"""What the slowest updates of the latency replay waited for: gpu_bench's latency sequence
(one generator over the rates, a fresh engine a rate, triangles or queries of 3-5
vertices) with a host and device timeline around the worst updates of chosen rates:
every launch (host enqueue, device start, the front's end and the back's, from events: a
front that waits for SMs which other lanes' matching holds shows here), the pool's compactions,
the collector's passes, the engine calls that took over 0.2 ms, and stack samples of
calls that ran over 0.5 ms (a sampling thread; it makes the interpreter switch threads
every 0.2 ms, so absolute figures are a little worse than the bench's).

    CSM_BENCH_DEVICE_GRAPH=1 python bench/latency_timeline.py [--rates 1e3,1e4,1e5,3e5]
        [--detail 1e5,3e5] [--max-query 3,5] [--cpu-warm] [--freeze]

``--cpu-warm`` compiles the CPU kernels first (gpu_bench does; numba's objects stay in
the collector's generations); ``--freeze`` moves everything alive after set-up out of the
collector's reach, as the service does at start-up. Rates without detail print one line.
"""

from __future__ import annotations

import argparse
import gc
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _harness import engine  # noqa: E402
from gpu_bench import _big_dataset, _serve, collector_passes  # noqa: E402
from latency_tail import _logged  # noqa: E402

from gpu import CountMode, warm_up  # noqa: E402


class _Calls:
    """The engine calls of a run (start, end, name) and stack samples of long ones."""

    def __init__(self) -> None:
        self.current: tuple[str, float] | None = None
        self.done: list[tuple[float, float, str]] = []
        self.samples: list[tuple[float, str]] = []
        self.stop = False

    def timed(self, name: str, fn: Any) -> Any:
        def call(*a: Any, **k: Any) -> Any:
            self.current = (name, time.perf_counter())
            try:
                return fn(*a, **k)
            finally:
                self.done.append((self.current[1], time.perf_counter(), name))
                self.current = None
        return call

    def sample(self, tid: int) -> None:
        """The sampling thread: the main thread's stack while a call runs over 0.5 ms."""
        while not self.stop:
            time.sleep(0.0002)
            c = self.current
            if c is None or time.perf_counter() - c[1] < 0.0005:
                continue
            f = sys._current_frames().get(tid)
            stack = []
            while f is not None and len(stack) < 12:
                stack.append(f"{Path(f.f_code.co_filename).name}:{f.f_code.co_name}:{f.f_lineno}")
                f = f.f_back
            self.samples.append((time.perf_counter(), " < ".join(stack)))


class _Ticket:
    """A pending batch whose ``ready`` and ``result`` are timed."""

    def __init__(self, calls: _Calls, p: Any) -> None:
        self.p = p
        self.result = calls.timed("result", p.result)
        self._ready = calls.timed("ready", lambda: p.ready)

    @property
    def ready(self) -> bool:
        return bool(self._ready())


def run(rate: float, n: int, rng: np.random.Generator, ds: Any, calls: _Calls,
        detail: bool) -> None:
    import cupy
    eng = engine("gpu", ds.initial, [q for _, q in ds.queries], CountMode.EMBEDDINGS)
    arr = np.cumsum(rng.exponential(1 / rate, n))
    arr -= arr[0]
    pipe = eng.executor._pipeline  # type: ignore[attr-defined]
    upd = pipe.updater
    launches: list[tuple[float, Any, Any, Any, int, int]] = []
    comps: list[tuple[float, Any, Any, int]] = []
    if detail:
        launch, submit = pipe._launch, eng.submit

        def logged_launch(g: Any, size: bool = False) -> None:
            t, e0 = time.perf_counter(), pipe.stream.record()
            launch(g, size)   # then: the front's end (the updater's stream), the back's
            ef = pipe.stream.record()
            launches.append((t, e0, ef, g.block.lane.stream.record(), g.n, g.block.lane.index))

        pipe._launch = logged_launch
        _logged(upd, comps)
        timed_submit = calls.timed("submit", submit)
        eng.submit = lambda b: _Ticket(calls, timed_submit(b))  # type: ignore[method-assign]

    calls.done.clear()
    calls.samples.clear()
    cupy.cuda.Device().synchronize()
    ev0 = pipe.stream.record()
    ev0.synchronize()
    t0 = time.perf_counter()
    with collector_passes() as passes:
        rt, _ = _serve(eng, ds.stream.slice(0, n), arr, 64, 0.125e-3)
    cupy.cuda.Device().synchronize()
    q = np.percentile(rt, [50, 99, 99.9]) * 1e3
    longest = max((x.seconds for x in passes), default=0.0)
    print(f"rate {rate:,.0f}: achieved {n / (arr[-1] + rt[-1]):,.0f} updates/s, p50 {q[0]:.3f} "
          f"p99 {q[1]:.3f} p99.9 {q[2]:.3f} max {rt.max() * 1e3:.3f} ms; {len(passes)} "
          f"collector passes, the longest {longest * 1e3:.2f} ms", flush=True)
    if not detail:
        return

    def dev(e: Any) -> float:
        return float(cupy.cuda.get_elapsed_time(ev0, e))

    fronts = np.array([dev(f) - dev(a) for _, a, f, _, _, _ in launches])
    backs = np.array([dev(b) - dev(f) for _, _, f, b, _, _ in launches])
    for name, x in (("fronts", fronts), ("backs", backs)):
        if len(x):
            p = np.percentile(x, [50, 99])
            print(f"  {len(x)} {name}: p50 {p[0]:.3f} p99 {p[1]:.3f} max {x.max():.3f} ms, "
                  f"{int((x > 0.2).sum())} over 0.2 ms")
    worst: list[int] = []
    for k in np.argsort(-rt):   # the three worst updates 10 ms apart
        if all(abs(arr[k] - arr[w]) >= 0.01 for w in worst):
            worst.append(int(k))
        if len(worst) == 3:
            break
    for k in worst:
        lo, hi = arr[k] - 0.0005, arr[k] + rt[k] + 0.0002
        print(f"  update {k}: arrival {arr[k] * 1e3:.3f} ms, response {rt[k] * 1e3:.3f} ms")
        for t, a, f, b, m, lane in launches:
            if lo <= t - t0 <= hi or lo * 1e3 - 2 <= dev(a) <= hi * 1e3:
                print(f"    launch: host {(t - t0) * 1e3:.3f}, device {dev(a):.3f}-{dev(b):.3f} "
                      f"({dev(b) - dev(a):.3f}; front {dev(f) - dev(a):.3f}), {m} updates, "
                      f"lane {lane}")
        for t, a, b, _ in comps:
            if lo - 0.002 <= t - t0 <= hi:
                print(f"    compaction: host {(t - t0) * 1e3:.3f}, "
                      f"device {dev(a):.3f}-{dev(b):.3f}")
        for x in passes:
            if lo <= x.start - t0 <= hi:
                print(f"    collector pass (generation {x.generation}) at "
                      f"{(x.start - t0) * 1e3:.3f}: {x.seconds * 1e3:.3f} ms")
        for a, b, name in calls.done:
            if b - a > 2e-4 and lo <= a - t0 <= hi:
                print(f"    {name} at {(a - t0) * 1e3:.3f}: {(b - a) * 1e3:.3f} ms")
        seen = Counter(s for t, s in calls.samples if lo <= t - t0 <= hi)
        for s, c in seen.most_common(4):
            print(f"    {c} samples: {s}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="1e3,1e4,1e5,3e5,1e6,1e7")
    ap.add_argument("--detail", default="1e5,3e5", help="rates whose worst updates are shown")
    ap.add_argument("--max-query", default="3,5")
    ap.add_argument("--count", type=int, default=20_000)
    ap.add_argument("--cpu-warm", action="store_true")
    ap.add_argument("--freeze", action="store_true")
    args = ap.parse_args()
    if args.cpu_warm:
        warm_up("cpu")
    warm_up("gpu")
    detail = {float(x) for x in args.detail.split(",") if x}
    calls = _Calls()
    if detail:
        sys.setswitchinterval(0.0002)
        threading.Thread(target=calls.sample, args=(threading.get_ident(),), daemon=True).start()
    for mq in (int(x) for x in args.max_query.split(",")):
        _, ds = _big_dataset(1_200_000, mq)
        if args.freeze:
            gc.collect()
            gc.freeze()
        print(f"queries of 3-{mq} vertices; {len(gc.get_objects())} objects tracked, "
              f"{gc.get_freeze_count()} frozen", flush=True)
        rng = np.random.default_rng(1)   # gpu_bench's: one generator over the rates
        for rate in (float(x) for x in args.rates.split(",")):
            gc.collect()   # the last rate's engine gone before this one is built
            run(rate, int(min(args.count, max(2000, rate * 2.0))), rng, ds, calls,
                rate in detail)
    calls.stop = True


if __name__ == "__main__":
    main()
