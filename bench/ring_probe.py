"""What a batch's hand-off to the device costs: a persistent kernel's doorbell in mapped
memory against a launch per batch (issue 16: "one persistent warp-specialised kernel, or
kernels pipelined on streams or CUDA graphs; decide by measurement").

Rounds of no work, timed on the host from the write of the request to the read of the
answer, microseconds, p50 / p99 / max over ROUNDS rounds:

* ring, 1 block / ring, a block an SM: a resident grid (``kernels/ring_probe.cu``) sees
  the doorbell word, every block checks in, block 0 answers in a mapped word the host
  spins on;
* graph + event: a captured graph of one empty kernel launched and its event synchronised
  (the device pipeline launches two such graphs a batch today);
* kernel + event: the same without the graph.

    python bench/ring_probe.py [ROUNDS]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu.cuda._device_graph import device_pointer, mapped_zeros  # noqa: E402
from gpu.cuda.kernels import cupy_or_raise, kernel, sm_count  # noqa: E402


def _stats(ns: np.ndarray) -> str:
    us = ns / 1e3
    return (f"p50 {np.percentile(us, 50):6.2f}  p99 {np.percentile(us, 99):6.2f}  "
            f"max {us.max():7.2f} us")


def _ring(cp, blocks: int, rounds: int) -> np.ndarray:  # type: ignore[no-untyped-def]
    bell = mapped_zeros(1, np.dtype(np.int64))
    ack = mapped_zeros(2, np.dtype(np.int64))
    gw = cp.zeros(3, cp.int64)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        kernel("ring_probe", "ring_echo")((blocks,), (32,), (
            device_pointer(bell), device_pointer(ack), gw, np.int64(rounds)))
    out = np.empty(rounds, np.int64)
    clock = time.perf_counter_ns
    for s in range(1, rounds + 1):
        t = clock()
        bell[0] = s
        while ack[0] < s:
            if ack[1] < 0:
                raise RuntimeError("the ring kernel timed out")
        out[s - 1] = clock() - t
    stream.synchronize()
    return out


def _launched(cp, graph: bool, rounds: int) -> np.ndarray:  # type: ignore[no-untyped-def]
    stream = cp.cuda.Stream(non_blocking=True)
    word = cp.zeros(1, cp.int64)
    empty = kernel("ring_probe", "ring_empty")
    launch: Callable[[], None]
    if graph:
        stream.begin_capture()
        empty((1,), (32,), (word,), stream=stream)
        g = stream.end_capture()
        launch = lambda: g.launch(stream)  # noqa: E731
    else:
        launch = lambda: empty((1,), (32,), (word,), stream=stream)  # noqa: E731
    out = np.empty(rounds, np.int64)
    clock = time.perf_counter_ns
    for i in range(rounds):
        t = clock()
        launch()
        stream.record().synchronize()
        out[i] = clock() - t
    return out


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    cp = cupy_or_raise()
    name = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"].decode()
    sys.stdout.write(f"{name}, {rounds:,} rounds of no work, host-timed\n")
    runs = [("ring, 1 block", lambda: _ring(cp, 1, rounds)),
            (f"ring, {sm_count()} blocks", lambda: _ring(cp, sm_count(), rounds)),
            ("graph + event", lambda: _launched(cp, True, rounds)),
            ("kernel + event", lambda: _launched(cp, False, rounds))]
    for label, run in runs:
        run()   # warm: module load, first touches
        sys.stdout.write(f"  {label:<18} {_stats(run())}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
