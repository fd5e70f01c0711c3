"""Runs of update messages on the engine (service/_runs.py), without a broker: results
come back in log order and equal one engine applying the same runs one by one; a run
waits behind the ones before it; a failing engine call fails every open run."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from gpu import BatchResult, CountMode, Engine, Query, QuerySpec
from service._runs import Run, Runs, run_batch
from service._types import Chunk
from streams import GenConfig, generate, iter_chunks
from streams.codec import Updates


def _engine() -> tuple[Engine, list[Updates]]:
    ds = generate(GenConfig(vertices=400, edges=2500, labels=2, queries=1, insert_ratio=0.4,
                            delete_ratio=0.1, seed=12))
    eng = Engine("cpu")
    g = ds.initial
    eng.load_graph(g.vertex_ids, g.vertex_labels, g.src, g.dst, g.label)
    tri = Query.build([(v, None) for v in range(3)], [(0, 1, None), (1, 2, None), (0, 2, None)])
    eng.register(QuerySpec(tri, CountMode.EMBEDDINGS))
    msgs = [Updates(op=c.op, src=c.src, dst=c.dst, label=c.label)
            for c in iter_chunks(ds.stream, 37)][:40]
    assert len(msgs) > 30
    return eng, msgs


def _run(off: int, u: Updates, chunk: Chunk) -> Run:
    """The one message at log offset ``off`` as a run."""
    return Run([(off, u, 0.0)], run_batch([(off, u, 0.0)]), chunk, False)


def test_runs_come_back_in_log_order_and_exact() -> None:
    eng, msgs = _engine()
    ref, _ = _engine()
    want = [ref.apply(run_batch([(off, u, 0.0)])) for off, u in enumerate(msgs)]

    async def main() -> list[tuple[int, BatchResult]]:
        got: list[tuple[int, BatchResult]] = []

        async def on_result(run: Run, result: BatchResult) -> None:
            got.append((run.run[0][0], result))

        runs = Runs(eng, on_result, depth=3)
        chunks = [Chunk([], [], {}) for _ in range(4)]
        for off, u in enumerate(msgs):   # ten runs a chunk, all added at once
            runs.add(_run(off, u, chunks[off // 10]))
        assert runs.open == len(msgs)
        await runs.drain()
        assert runs.open == 0
        assert [len(c.runs) for c in chunks] == [min(10, len(msgs) - 10 * k) for k in range(4)]
        assert all(f.done() and f.exception() is None for c in chunks for f in c.runs)
        await runs.close()
        return got

    got = asyncio.run(main())
    assert [off for off, _ in got] == list(range(len(msgs)))
    for (_, r), w in zip(got, want, strict=True):
        assert np.array_equal(r.counts, w.counts)
        assert np.array_equal(r.seq, w.seq) and np.array_equal(r.ops.tick, w.ops.tick)


def test_per_query_delivery_hands_each_query_on_in_log_order() -> None:
    """With per-query delivery each query's result of each run goes to ``on_query`` (that
    query alone), in log order per query; ``on_result`` still gets every run in order,
    with the queries handed on ahead named, and the parts add up to the whole result."""
    eng, msgs = _engine()
    eng.register(QuerySpec(Query.build([(v, None) for v in range(4)],
                                       [(0, 1, None), (1, 2, None), (2, 3, None)]),
                           CountMode.EMBEDDINGS))
    ref, _ = _engine()
    ref.register(QuerySpec(Query.build([(v, None) for v in range(4)],
                                       [(0, 1, None), (1, 2, None), (2, 3, None)]),
                           CountMode.EMBEDDINGS))
    want = [ref.apply(run_batch([(off, u, 0.0)])) for off, u in enumerate(msgs)]

    async def main() -> tuple[list[tuple[int, BatchResult]], list[tuple[int, set[int]]]]:
        parts: list[tuple[int, BatchResult]] = []
        whole: list[tuple[int, set[int]]] = []

        async def on_query(run: Run, result: BatchResult) -> None:
            parts.append((run.run[0][0], result))

        async def on_result(run: Run, result: BatchResult) -> None:
            whole.append((run.run[0][0], set(run.handed)))

        runs = Runs(eng, on_result, depth=3, on_query=on_query, per_query=True)
        chunk = Chunk([], [], {})
        for off, u in enumerate(msgs):
            runs.add(_run(off, u, chunk))
        await runs.drain()
        await runs.close()
        return parts, whole

    parts, whole = asyncio.run(main())
    qids = want[0].query_ids
    assert [off for off, _ in whole] == list(range(len(msgs)))
    assert all(handed == set(qids) for _, handed in whole)
    for j, q in enumerate(qids):
        mine = [(off, r) for off, r in parts if r.query_ids == (q,)]
        assert [off for off, _ in mine] == list(range(len(msgs))), q
        for off, r in mine:
            assert np.array_equal(r.counts[:, 0], want[off].counts[:, j]), (off, q)
            col = want[off].counts[:, j]
            assert r.stats.positive == int(col[col > 0].sum())
    assert len(parts) == len(qids) * len(msgs)


def test_a_failing_run_fails_every_open_run() -> None:
    eng, msgs = _engine()

    async def main() -> None:
        async def on_result(run: Run, result: BatchResult) -> None:
            if run.run[0][0] == 2:
                raise RuntimeError("publisher down")

        runs = Runs(eng, on_result)
        chunk = Chunk([], [], {})
        for off, u in enumerate(msgs[:6]):
            runs.add(_run(off, u, chunk))
        with pytest.raises(RuntimeError, match="publisher down"):
            await runs.drain()
        done = await asyncio.gather(*chunk.runs, return_exceptions=True)
        assert done[:2] == [None, None]
        assert all(isinstance(d, RuntimeError) for d in done[2:])
        with pytest.raises(RuntimeError, match="publisher down"):
            runs.add(_run(9, msgs[0], chunk))
        with pytest.raises(RuntimeError, match="publisher down"):
            await runs.below(1)
        await runs.close()

    asyncio.run(main())


class _FailingEngine(Engine):
    """Fault injection: the engine's submit raises on the given call."""

    def __init__(self, fail_at: int) -> None:
        super().__init__("cpu")
        self.calls, self.fail_at = 0, fail_at

    def submit(self, batch):  # type: ignore[no-untyped-def, override]
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("device lost")
        return super().submit(batch)


def test_a_failing_submit_fails_its_run_and_every_later_one() -> None:
    _, msgs = _engine()

    async def main() -> None:
        async def on_result(run: Run, result: BatchResult) -> None:
            return None

        runs = Runs(_FailingEngine(fail_at=2), on_result)
        chunk = Chunk([], [], {})
        for off, u in enumerate(msgs[:4]):
            runs.add(_run(off, u, chunk))
        with pytest.raises(RuntimeError, match="device lost"):
            await runs.drain()
        done = await asyncio.gather(*chunk.runs, return_exceptions=True)   # none left pending
        assert done[0] is None
        assert all(isinstance(d, RuntimeError) for d in done[1:])
        assert runs.open == 0
        await runs.close()

    asyncio.run(main())


def test_close_cancels_the_open_runs() -> None:
    eng, msgs = _engine()

    async def main() -> None:
        entered, gate = asyncio.Event(), asyncio.Event()

        async def on_result(run: Run, result: BatchResult) -> None:
            entered.set()
            await gate.wait()   # the publisher hangs: every run stays open

        runs = Runs(eng, on_result)
        chunk = Chunk([], [], {})
        for off, u in enumerate(msgs[:3]):
            runs.add(_run(off, u, chunk))
        await entered.wait()   # the first run is being handed on
        assert runs.open == 3
        await runs.close()
        assert all(f.cancelled() for f in chunk.runs)

    asyncio.run(main())
