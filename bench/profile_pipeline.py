"""Host profile of the device pipeline at b=1 (cProfile over 2,000 one-update batches,
submitted and read one at a time): where the host's microseconds per batch go.

    python bench/profile_pipeline.py
"""

from __future__ import annotations

import cProfile
import pstats
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _harness import engine  # noqa: E402

from gpu import CountMode  # noqa: E402
from streams import GenConfig, generate, iter_chunks  # noqa: E402


def main() -> None:
    ds = generate(GenConfig(vertices=20000, edges=100000, labels=8, queries=4, min_query=3,
                            max_query=5, insert_ratio=0.45, delete_ratio=0.05, seed=7))
    eng = engine("gpu", ds.initial, [q for _, q in ds.queries], CountMode.EMBEDDINGS, True)
    chunks = list(iter_chunks(ds.stream, 1))[:2100]
    for c in chunks[:100]:
        eng.apply(c)
    prof = cProfile.Profile()
    prof.enable()
    for c in chunks[100:]:
        eng.submit(c).result()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
