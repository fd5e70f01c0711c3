"""The retention window (what a shard's new owner may match again) and the batches it is
matched in, without a broker."""

from __future__ import annotations

import numpy as np

from gpu import BatchResult, Engine, UpdateBatch
from service._catchup import _merged
from service._window import PastRun, Window


def _run(eng: Engine, offset: int, n: int) -> tuple[int, PastRun]:
    tick0 = eng.graph.tick + 1
    src = np.arange(offset * 100, offset * 100 + n, dtype=np.int64)
    r = eng.apply(UpdateBatch(seq=offset * 1_000_000 + np.arange(n, dtype=np.int64),
                              op=np.zeros(n, np.int8), src=src, dst=src + 1,
                              label=np.zeros(n, np.int32)))
    return tick0, PastRun(offset, offset, r, {offset: 0.0})


def test_window_keeps_the_last_updates_and_holds_their_versions() -> None:
    eng = Engine("cpu")
    w = Window(eng, limit=25)
    w.reset(0)
    for off in range(5):
        w.add(*_run(eng, off, 10))
    assert [r.first for r in w.since(0)] == [3, 4]   # 20 updates kept, 30 dropped
    assert w.start == 3 and w.covers(3) and not w.covers(2)
    assert w.start_tick == 31   # the first tick of the oldest kept run
    eng.apply(UpdateBatch.build([10**9], [0], [10**6], [10**6 + 1], [0]))
    assert eng.graph.watermark == 30   # held back: ticks 31 on stay readable


def test_disabled_window_holds_nothing() -> None:
    eng = Engine("cpu")
    w = Window(eng, limit=0)
    w.reset(0)
    w.add(*_run(eng, 0, 10))
    assert not w.since(0)
    eng.apply(UpdateBatch.build([10**9], [0], [10**6], [10**6 + 1], [0]))
    assert eng.graph.watermark == eng.graph.tick - 1


def test_merged_runs_stop_at_registrations() -> None:
    eng = Engine("cpu")
    runs = [_run(eng, off, 3)[1] for off in (1, 2, 4, 5)]   # offset 3: a registration
    out = _merged(runs, cuts=[3])
    assert [(r.first, r.last) for r in out] == [(1, 2), (4, 5)]
    joined = out[0].result
    assert isinstance(joined, BatchResult) and len(joined.ops) == 6
    assert np.array_equal(joined.seq, np.concatenate([runs[0].result.seq, runs[1].result.seq]))
    assert set(out[1].arrived) == {4, 5}
