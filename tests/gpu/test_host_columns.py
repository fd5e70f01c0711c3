"""The device pipeline's compiled host columns (gpu/cuda/_host_columns.py) against the
numpy they replace; CPU only (they read host memory)."""

from __future__ import annotations

import numpy as np

from gpu.cuda._host_columns import intern_ends, note_ext, read_ops


def test_read_ops_equals_the_numpy_reading() -> None:
    rng = np.random.default_rng(3)
    cap, lo, n = 64, 11, 37
    out = rng.integers(-1, 1000, (6, cap)).astype(np.int64)
    out[4] = rng.integers(0, 3, cap)   # statuses
    op = rng.integers(0, 2, n).astype(np.int8)
    src = rng.integers(0, 1 << 40, n).astype(np.int64)
    dst = rng.integers(0, 1 << 40, n).astype(np.int64)
    got, applied = read_ops(out, lo, n, op, src, dst)
    c = out[:, lo:lo + n]
    want = (np.arange(n, dtype=np.int32), op, c[0].astype(np.int32), c[1].astype(np.int32),
            src, dst, c[2].astype(np.int32), c[3], c[4].astype(np.int8), c[5].astype(np.int8))
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and np.array_equal(g, w)
    assert applied == np.count_nonzero(c[4] == 0)
    assert not np.shares_memory(got[1], op) and not np.shares_memory(got[4], src)


def test_note_ext_equals_the_numpy_scatter() -> None:
    rng = np.random.default_rng(4)
    n, nv = 200, 50
    a = rng.integers(-1, nv, n).astype(np.int32)
    b = rng.integers(-1, nv, n).astype(np.int32)
    ext = rng.integers(0, 1 << 40, nv).astype(np.int64)   # one external id per vertex
    src, dst = ext[np.maximum(a, 0)], ext[np.maximum(b, 0)]
    got, want = np.zeros(nv, np.int64), np.zeros(nv, np.int64)
    note_ext(got, a, src, b, dst)
    for ids, e in ((a, src), (b, dst)):
        known = ids >= 0
        want[ids[known]] = e[known]
    assert np.array_equal(got, want)


def test_intern_ends_gives_slots_in_first_seen_order() -> None:
    from gpu.graph import IdMap

    rng = np.random.default_rng(5)
    n = 300
    op = rng.integers(0, 4, n).astype(np.int8)   # 2, 3: vertex operations (no destination)
    src = rng.integers(0, 80, n).astype(np.int64) * 7919
    dst = rng.integers(0, 80, n).astype(np.int64) * 7919
    ids = IdMap(16)
    ids.reserve(2 * n)
    new_ext = np.empty(2 * n, np.int64)
    sx, sy = np.empty(n, np.int32), np.empty(n, np.int32)
    k = intern_ends(ids.keys, ids.vals, ids.used, op, src, dst, 2, 5, new_ext, sx, sy)
    slot: dict[int, int] = {}   # every source first, then every destination
    for x in [*src.tolist(), *dst[op < 2].tolist()]:
        slot.setdefault(x, 5 + len(slot))
    assert k == len(slot) and new_ext[:k].tolist() == list(slot)
    assert sx.tolist() == [slot[x] for x in src.tolist()]
    assert sy.tolist() == [slot[x] if o < 2 else -1 for x, o in zip(dst.tolist(), op.tolist(),
                                                                    strict=True)]


def test_applied_edges_equals_the_numpy_selection() -> None:
    """OpTable.applied_edges (compiled) selects what the numpy mask did, for tables read
    from a control block and for slices of one (the pipeline's per-batch rows)."""
    from gpu.graph._host import OpTable

    rng = np.random.default_rng(6)
    for n in (0, 1, 8, 300):
        cols, _ = read_ops(rng.integers(-1, 3, (6, 512)).astype(np.int64), 5, n,
                           rng.integers(0, 4, n).astype(np.int8), np.zeros(n, np.int64),
                           np.zeros(n, np.int64))
        ops = OpTable(*cols)
        want = np.flatnonzero((ops.op <= 1) & (ops.status == 0))
        got = ops.applied_edges()
        assert got.dtype == np.int64 and np.array_equal(got, want)
        half = OpTable(*(c[n // 2:] for c in cols))
        assert np.array_equal(half.applied_edges(), want[want >= n // 2] - n // 2)
