"""What the host is doing when a response-time replay stalls: gpu_bench's latency replays
(warm_up, triangles then queries of 3-5 vertices, one seeded rng), with a watchdog thread
that samples the main thread's stack every 0.5 ms and prints every place it stayed longer
than ``--stall-ms``, beside each run's p50 / p99 / max and its worst responses.

    CSM_BENCH_DEVICE_GRAPH=1 python bench/stall_watch.py [--rates 1000,10000,100000]

A sample needs the GIL: the watchdog sees the call the main thread sits in, not waits
inside the device (those show as worst responses without a stall).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import gpu_bench as G  # noqa: E402
from _harness import engine  # noqa: E402

from gpu import CountMode, warm_up  # noqa: E402


class Watchdog(threading.Thread):
    """Samples ``target``'s innermost frame; records (start, seconds, stack) of every
    position held longer than ``least`` seconds."""

    def __init__(self, target: int, least: float) -> None:
        super().__init__(daemon=True)
        self.target, self.least = target, least
        self.stalls: list[tuple[float, float, list[str]]] = []
        self.stop = False

    def run(self) -> None:
        last, since, stack = None, 0.0, []
        while not self.stop:
            f = sys._current_frames().get(self.target)
            if f is not None:
                key, now = (f.f_code, f.f_lasti), time.perf_counter()
                if key != last:
                    if last is not None and now - since > self.least:
                        self.stalls.append((since, now - since, stack))
                    last, since, stack = key, now, traceback.format_stack(f)[-5:]
            time.sleep(0.0005)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="1000,10000,100000")
    ap.add_argument("--stall-ms", type=float, default=4.0)
    args = ap.parse_args()
    warm_up("cpu")
    warm_up("gpu")
    dog = Watchdog(threading.get_ident(), args.stall_ms / 1e3)
    dog.start()
    rng = np.random.default_rng(1)
    for mq in (3, 5):
        _, ds = G._big_dataset(1_200_000, mq)
        qs = [q for _, q in ds.queries]
        for rate in (float(r) for r in args.rates.split(",")):
            eng = engine("gpu", ds.initial, qs, CountMode.EMBEDDINGS)
            n = int(min(20_000, max(2000, rate * 2.0)))
            arr = np.cumsum(rng.exponential(1 / rate, n))
            arr -= arr[0]
            dog.stalls.clear()
            t0 = time.perf_counter()
            rt, _ = G._serve(eng, ds.stream.slice(0, n), arr, 64, 0.000125)
            worst = np.argsort(rt)[-3:]
            print(f"queries of 3-{mq}, {rate:,.0f}/s: p50 / p99 / max "
                  f"{np.percentile(rt, 50) * 1e3:.3f} / {np.percentile(rt, 99) * 1e3:.3f} / "
                  f"{rt.max() * 1e3:.3f} ms; worst (arrival ms: response ms) "
                  f"{[f'{arr[w] * 1e3:.1f}: {rt[w] * 1e3:.1f}' for w in worst]}", flush=True)
            for at, secs, stack in dog.stalls:
                print(f"  held {secs * 1e3:.1f} ms from {(at - t0) * 1e3:.1f} ms at:")
                print("".join("    " + line for line in "".join(stack).splitlines(True)))
    dog.stop = True


if __name__ == "__main__":
    main()
