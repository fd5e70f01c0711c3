"""How fast the host reads what the device wrote: mapped pinned memory (the pipeline's
control blocks), pinned memory filled by a copy, and pageable memory.

On the H100 host the pipeline's per-batch reads looked slow: a poll of one control-block
word took 2.3 us and ``read_batch`` 36 us at b = 64, against 4.8 us on a build machine
with plain numpy arrays. If reads of mapped memory are uncached there, results should be
copied into host memory once (or written there by a copy) before they are read.
Measured 2026-11-24 on that host: they are not (0.18 us a word; 1.1, 1.4 and 6.9 us for
8 bytes, 4 KiB and 256 KiB, the same for all three kinds of memory).

    python bench/mapped_read.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu.cuda._device_graph import mapped_zeros  # noqa: E402
from gpu.cuda.kernels import cupy_or_raise  # noqa: E402


def _per_read(arr: np.ndarray, reps: int) -> float:
    """Microseconds per pass summing the whole array, after the device wrote it."""
    t = time.perf_counter()
    for _ in range(reps):
        arr.sum()
    return (time.perf_counter() - t) / reps * 1e6


def main() -> None:
    cp = cupy_or_raise()
    for words in (1, 8 * 64, 8 * 4096):
        mapped = mapped_zeros(words, np.dtype(np.int64))
        dev = cp.arange(words, dtype=cp.int64)
        # the device writes the mapped array (a kernel through its device pointer)
        view = cp.ndarray((words,), cp.int64, cp.cuda.MemoryPointer(
            cp.cuda.UnownedMemory(mapped.ctypes.data, words * 8, mapped), 0))
        view[...] = dev
        cp.cuda.Device().synchronize()
        pinned = np.frombuffer(cp.cuda.alloc_pinned_memory(words * 8), np.int64, words)
        dev.get(out=pinned)
        pageable = np.empty(words, np.int64)
        pageable[...] = pinned
        reps = 2000 if words < 10_000 else 200
        rows = [("mapped (kernel-written)", mapped), ("pinned (copied)", pinned),
                ("pageable", pageable)]
        line = ", ".join(f"{name} {_per_read(a, reps):.2f} us" for name, a in rows)
        sys.stdout.write(f"{words * 8:>7} bytes: {line}\n")
        t = time.perf_counter()
        for _ in range(reps):
            int(mapped[0])
        sys.stdout.write(f"        one word of mapped memory: "
                         f"{(time.perf_counter() - t) / reps * 1e6:.2f} us\n")


if __name__ == "__main__":
    main()
