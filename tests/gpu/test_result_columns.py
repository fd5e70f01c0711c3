"""A batch's result columns (gpu/_result_columns.py) against their numpy definition, and
one compiled signature whatever the number of queries (a second one is compiled on a
live stream's first such batch: a latency spike)."""

from __future__ import annotations

import numpy as np
from _batches import triangle

from gpu import CountMode, Engine, QuerySpec, UpdateBatch
from gpu._result_columns import _columns, result_columns


def _numpy(raw, status, op, ei, flat, num, den):  # type: ignore[no-untyped-def]
    n, nq = len(raw), len(num)
    counts = np.zeros((n, nq), np.int64)
    sign = 1 - 2 * op[ei].astype(np.int64)
    counts[ei, :] = flat.reshape(len(ei), nq) * num // den * sign[:, None]
    first = np.r_[True, raw[1:] != raw[:-1]]
    idx = np.arange(n)
    sub = idx - np.maximum.accumulate(np.where(first, idx, 0))
    last = np.r_[raw[1:] != raw[:-1], True]
    st = np.bincount(status[last], minlength=3)
    return counts, sub, [*st, np.maximum(counts, 0).sum(), np.maximum(-counts, 0).sum()]


def test_columns_equal_their_numpy_definition() -> None:
    rng = np.random.default_rng(5)
    for _ in range(50):
        n_raw = int(rng.integers(1, 40))
        raw = np.repeat(np.arange(n_raw, dtype=np.int32), rng.integers(1, 4, n_raw))
        n, nq = len(raw), int(rng.integers(0, 4))
        status = rng.integers(0, 3, n).astype(np.int8)
        op = rng.integers(0, 2, n).astype(np.int8)
        ei = np.flatnonzero(rng.random(n) < 0.6)
        flat = rng.integers(0, 50, len(ei) * nq).astype(np.int64)
        scale = np.stack([rng.integers(1, 4, nq), np.ones(nq, np.int64)], 1)
        got = result_columns(raw, status, op, ei, flat, scale[:, 0], scale[:, 1])
        want = _numpy(raw, status, op, ei, flat, scale[:, 0], scale[:, 1])
        assert np.array_equal(got[0], want[0])
        assert np.array_equal(got[1], want[1])
        assert got[2].tolist() == [int(x) for x in want[2]]


def test_one_signature_whatever_the_number_of_queries() -> None:
    tri = triangle()
    for nq in (1, 3):
        eng = Engine("cpu")
        eng.load_graph([], [], [1, 2], [2, 3], [0, 0])
        for _ in range(nq):
            eng.register(QuerySpec(tri, CountMode.EMBEDDINGS))
        r = eng.apply(UpdateBatch.build([0, 1], [0, 0], [1, 1], [3, 3], [0, 0]))
        assert r.counts.tolist() == [[6] * nq, [0] * nq]
    assert len(_columns.signatures) == 1
