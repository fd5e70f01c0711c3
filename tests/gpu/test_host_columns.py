"""The device pipeline's compiled host columns (gpu/cuda/_host_columns.py) against the
numpy they replace; CPU only (they read host memory)."""

from __future__ import annotations

import numpy as np

from gpu._result_columns import result_columns
from gpu.cuda._arena import Region, ResultArena, numpy_chunk
from gpu.cuda._host_columns import finish_launch, insert_multiplicity, intern_ends, stage_rows
from gpu.graph import IdMap


def _rows(rng: np.random.Generator, n: int, nq: int) -> tuple[np.ndarray, ...]:
    """op, status and signed counts as the device writes a launch's rows: counts only for
    applied edge updates, + for an insertion, - for a deletion."""
    op = rng.integers(0, 2, n).astype(np.int8)
    status = rng.integers(0, 3, n).astype(np.int8)
    counts = rng.integers(0, 50, (n, nq)).astype(np.int64)
    counts[status != 0] = 0
    counts[op == 1] *= -1
    return op, status, counts


def finish_rows(op: np.ndarray, status: np.ndarray,
                counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One batch's applied indices and tally through finish_launch."""
    ei, rows = finish_launch(op, status, counts, 0, np.array([0, len(op)], np.int64))
    return ei[rows[0, 2]:rows[0, 3]], rows[0, 4:]


def test_finish_launch_equals_applied_edges_and_result_columns() -> None:
    """The applied indices and tally the host picks out of a region's rows are what
    OpTable.applied_edges and result_columns give (one primitive update a raw one)."""
    from gpu.graph._host import OpTable

    rng = np.random.default_rng(3)
    for n, nq in ((37, 2), (1, 1), (0, 3), (500, 1)):
        op, status, counts = _rows(rng, n, nq)
        ei, tally = finish_rows(op, status, counts)
        z = np.zeros(n, np.int32)
        ops = OpTable(np.arange(n, dtype=np.int32), op, z, z, z.astype(np.int64),
                      z.astype(np.int64), z, z.astype(np.int64), status, status)
        want = ops.applied_edges()
        assert ei.dtype == np.int64 and np.array_equal(ei, want)
        flat = np.abs(counts[want]).ravel()
        w_counts, _, w_tally = result_columns(ops.raw, status, op, want, flat,
                                              np.ones(nq, np.int64), np.ones(nq, np.int64))
        assert np.array_equal(w_counts, counts) and np.array_equal(tally, w_tally)


def _arena(chunk: int) -> ResultArena:
    return ResultArena(chunk, numpy_chunk)


def test_a_regions_columns_are_laid_out_as_the_kernel_reads_them() -> None:
    """tick, src, dst, counts (int64), a, b, label (int32), op, status, reason (int8),
    each ``rows`` long, one after the other from the region's address (update.cu
    region_at), inside the region's bytes."""
    rows, nq = 13, 3
    r = _arena(1 << 12).take(rows, nq)
    at = r.device
    for name, size in (("tick", 8), ("src", 8), ("dst", 8), ("counts", 8 * nq), ("a", 4),
                       ("b", 4), ("label", 4), ("op", 1), ("status", 1), ("reason", 1)):
        col = getattr(r, name)
        assert col.ctypes.data == at and col.nbytes == size * rows, name
        assert col.flags.writeable and col.flags.c_contiguous
        at += size * rows
    assert at - r.device == Region.nbytes(rows, nq)


def test_the_arena_reuses_a_region_once_its_last_view_is_gone() -> None:
    """Regions come from a ring: freed ones (in any order) make room again, a live one
    (or any view of it) is never handed out twice, and a chunk too full gives way to a
    larger one while the old one's regions stay valid."""
    import gc

    rng = np.random.default_rng(9)
    arena = _arena(1 << 14)
    live: list[tuple[np.ndarray, int]] = []   # a view kept of each live region, its mark
    mark = 0
    for step in range(3000):
        if live and rng.random() < 0.5:   # drop one (the oldest or any)
            live.pop(0 if rng.random() < 0.5 else int(rng.integers(0, len(live))))
        else:
            r = arena.take(int(rng.integers(1, 40)), int(rng.integers(1, 3)))
            view = r.counts if rng.random() < 0.5 else r.reason[1:]   # keeps it all
            mark += 1
            r.tick[:] = mark
            live.append((r.tick, mark))
            del r, view
        if step % 500 == 0:
            gc.collect()
        for tick, m in live:   # nothing live was overwritten by a later region
            assert (tick == m).all()
    del live
    gc.collect()
    assert arena.live <= 1
    chunks = arena.chunks
    for _ in range(1000):   # regions taken and dropped one after the other: no new chunk
        arena.take(int(rng.integers(1, 40)), 2).tick[:] = 1
    assert arena.chunks == chunks


def test_a_region_held_while_the_ring_laps_it_keeps_its_rows() -> None:
    """Regions of one size end exactly where the oldest live one starts: the ring is then
    full, not empty (a held result was handed out again, found in review); and a region
    larger than a chunk gets its own, leaving the ring's chunk as it was."""
    from collections import deque

    arena = _arena(1 << 16)
    kept, window = [], deque(maxlen=10)   # every 1,000th result held, and the last ten
    for i in range(5001):
        r = arena.take(64, 1)
        r.tick[:] = i
        window.append((r.tick, i))
        if i % 1000 == 0:
            kept.append((r.tick, i))
        del r
        for tick, m in [*kept, *window]:
            assert (tick == m).all(), (i, m)
    chunks = arena.chunks
    big = arena.take(4096, 4)   # 4,096 x 71 bytes: more than the chunk of 65,536
    big.tick[:] = 7
    assert arena.chunks == chunks and (big.tick == 7).all()
    assert all((tick == m).all() for tick, m in [*kept, *window])


def test_pinned_memory_comes_and_goes_in_a_claim_never_in_making_its_region() -> None:
    """A pipelined launch waits on the device for its region, so whatever allocates or
    frees a chunk (both wait for the device) happens when its room is claimed, before the
    launch; the region made afterwards touches no chunk, and the claimed room comes back
    once its region's last view goes."""
    import gc

    made: list[int] = []

    def alloc(size: int):  # type: ignore[no-untyped-def]
        made.append(size)
        return numpy_chunk(size)

    arena = ResultArena(1 << 12, alloc)
    held = [arena.take(8, 1) for _ in range(4)]   # they block the ring
    claims = [arena.claim(8, 1) for _ in range(40)]   # a new chunk, twice as large, in here
    assert made and made[-1] > 1 << 12
    grown = len(made)
    regions = [arena.region(c) for c in claims]
    big = arena.region(arena.claim(4096, 4))   # a chunk of its own, from its claim
    assert len(made) == grown + 1
    for i, r in enumerate(regions):
        r.tick[:] = i
    assert all((r.tick == i).all() for i, r in enumerate(regions)) and big.rows == 4096
    del held, regions, big, r
    gc.collect()
    assert arena.live == 0
    chunks = arena.chunks
    for _ in range(200):   # the room came back: no more chunks
        arena.region(arena.claim(8, 1)).tick[:] = 1
    assert arena.chunks == chunks


def test_a_batchs_columns_are_its_rows_of_the_region() -> None:
    """What the pipeline hands out for a launch's tickets (rows lo.. of its region, or the
    whole region): views of the region's columns, raw and sub shared read-only, the applied
    indices and tally of its own rows only."""
    from gpu.cuda._pipeline import _columns

    rng = np.random.default_rng(12)
    nq, sizes = 2, (5, 1, 30)
    r = _arena(1 << 16).take(sum(sizes), nq)
    op, status, counts = _rows(rng, r.rows, nq)
    r.op[:], r.status[:], r.counts[:] = op, status, counts
    for name in ("tick", "src", "dst", "a", "b", "label", "reason"):
        col = getattr(r, name)
        col[:] = rng.integers(-1, 1 << 20, r.rows)
    lo = 0
    for n in (*sizes, r.rows):
        at = 0 if n == r.rows else lo
        got = _columns(r, at, n)
        ops = got.ops
        assert np.array_equal(ops.raw, np.arange(n)) and not ops.raw.flags.writeable
        assert np.array_equal(got.sub, np.zeros(n)) and not got.sub.flags.writeable
        for name in ("op", "a", "b", "src", "dst", "label", "tick", "status", "reason"):
            col = getattr(ops, name)
            assert np.shares_memory(col, getattr(r, name)), name
            assert np.array_equal(col, getattr(r, name)[at:at + n]), name
        want_ei, want_tally = finish_rows(op[at:at + n], status[at:at + n], counts[at:at + n])
        assert np.array_equal(got.applied, want_ei) and np.array_equal(got.tally, want_tally)
        assert np.array_equal(got.counts, counts[at:at + n])
        if n != r.rows:
            lo += n


def test_a_launchs_batches_are_read_in_one_pass() -> None:
    """Every batch of a launch (rows row0 + bounds[t].. of its region, one compiled pass
    for them all) gets what its rows alone give, its columns views of the
    region's rows, whatever the sizes (empty batches too)."""
    from gpu.cuda._pipeline import _launch_columns

    rng = np.random.default_rng(21)
    for nq, sizes, row0 in ((3, (8, 8, 1, 0, 40, 8), 5), (1, (1,), 0), (2, (64,) * 13, 0)):
        r = _arena(1 << 18).take(row0 + sum(sizes), nq)
        op, status, counts = _rows(rng, r.rows, nq)
        r.op[:], r.status[:], r.counts[:] = op, status, counts
        r.tick[:] = rng.integers(0, 1 << 30, r.rows)
        bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        got = _launch_columns(r, row0, bounds)
        assert len(got) == len(sizes)
        for t, cols in enumerate(got):
            lo, hi = row0 + int(bounds[t]), row0 + int(bounds[t + 1])
            want_ei, want_tally = finish_rows(op[lo:hi], status[lo:hi], counts[lo:hi])
            assert np.array_equal(cols.applied, want_ei), t
            assert list(cols.tally) == want_tally.tolist() and isinstance(cols.tally[0], int)
            assert np.array_equal(cols.counts, counts[lo:hi])
            assert np.array_equal(cols.ops.tick, r.tick[lo:hi])
            assert np.shares_memory(cols.ops.tick, r.tick) or hi == lo
            assert len(cols.ops) == hi - lo == len(cols.sub)


def test_stage_rows_writes_the_rows_intern_ends_gives() -> None:
    rng = np.random.default_rng(8)
    n, cap, at = 120, 256, 30
    op = rng.integers(0, 4, n).astype(np.int8)
    src = rng.integers(0, 50, n).astype(np.int64) * 7919
    dst = rng.integers(0, 50, n).astype(np.int64) * 7919
    label = rng.integers(0, 9, n).astype(np.int32)
    maps = [IdMap(16), IdMap(16)]
    for m in maps:
        m.reserve(2 * n)
    inp = np.full((4, cap), -7, np.int32)
    new_a, new_b = np.empty(2 * n, np.int64), np.empty(2 * n, np.int64)
    before = [a.copy() for a in (maps[0].keys, maps[0].vals, maps[0].used, maps[0].direct)]
    assert stage_rows(maps[0].keys, maps[0].vals, maps[0].used, maps[0].direct, op, src, dst,
                      label, 2, 3, new_a, inp, at, True) == -1   # vertex operations: refused
    assert (inp == -7).all()
    after = (maps[0].keys, maps[0].vals, maps[0].used, maps[0].direct)
    assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True))
    k = stage_rows(maps[0].keys, maps[0].vals, maps[0].used, maps[0].direct, op, src, dst,
                   label, 2, 3, new_a, inp, at, False)
    sx, sy = np.empty(n, np.int32), np.empty(n, np.int32)
    assert k == intern_ends(maps[1].keys, maps[1].vals, maps[1].used, maps[1].direct, op, src,
                            dst, 2, 3, new_b, sx, sy)
    assert np.array_equal(new_a[:k], new_b[:k])
    assert np.array_equal(inp[:, at:at + n], np.array([op, sx, sy, label], np.int32))
    assert (inp[:, :at] == -7).all() and (inp[:, at + n:] == -7).all()


def test_intern_ends_gives_slots_in_first_seen_order() -> None:
    rng = np.random.default_rng(5)
    n = 300
    op = rng.integers(0, 4, n).astype(np.int8)   # 2, 3: vertex operations (no destination)
    src = rng.integers(0, 80, n).astype(np.int64) * 7919
    dst = rng.integers(0, 80, n).astype(np.int64) * 7919
    ids = IdMap(16)
    ids.reserve(2 * n)
    new_ext = np.empty(2 * n, np.int64)
    sx, sy = np.empty(n, np.int32), np.empty(n, np.int32)
    k = intern_ends(ids.keys, ids.vals, ids.used, ids.direct, op, src, dst, 2, 5, new_ext, sx,
                    sy)
    slot: dict[int, int] = {}   # every source first, then every destination
    for x in [*src.tolist(), *dst[op < 2].tolist()]:
        slot.setdefault(x, 5 + len(slot))
    assert k == len(slot) and new_ext[:k].tolist() == list(slot)
    assert sx.tolist() == [slot[x] for x in src.tolist()]
    assert sy.tolist() == [slot[x] if o < 2 else -1 for x, o in zip(dst.tolist(), op.tolist(),
                                                                    strict=True)]


def test_intern_ends_through_the_direct_array_equals_the_table_alone() -> None:
    # small ids (the direct array covers some of them, not all) after a bulk load: the same
    # slots as the table alone, and the direct array still mirrors the table afterwards
    from gpu.graph._idmap import intern_bulk

    rng = np.random.default_rng(11)
    loaded = rng.permutation(3000)[:1200].astype(np.int64)
    n = 4000
    op = rng.integers(0, 4, n).astype(np.int8)
    src = rng.integers(0, 5000, n).astype(np.int64)
    dst = rng.integers(0, 5000, n).astype(np.int64)
    src[::7] += 1 << 40   # some far beyond any direct array
    got = []
    for use_direct in (True, False):
        ids = IdMap(16)
        ids.reserve(len(loaded) + 2 * n)
        intern_bulk(ids.keys, ids.vals, ids.used, loaded)
        ids.count = len(loaded)
        if use_direct:
            ids.index_direct()
            assert 0 < len(ids.direct) < 5000
        new_ext = np.empty(2 * n, np.int64)
        sx, sy = np.empty(n, np.int32), np.empty(n, np.int32)
        k = intern_ends(ids.keys, ids.vals, ids.used, ids.direct, op, src, dst, 2,
                        len(loaded), new_ext, sx, sy)
        got.append((k, new_ext[:k].copy(), sx, sy))
        if use_direct:
            want = ids.direct.copy()
            ids.index_direct()   # rebuilt from the table: equal to what was kept
            assert np.array_equal(ids.direct[:len(want)], want)
    for a, b in zip(got[0], got[1], strict=True):
        assert np.array_equal(a, b)


def test_applied_edges_equals_the_numpy_selection() -> None:
    """OpTable.applied_edges (compiled) selects what the numpy mask did, for tables and
    for slices of one (the pipeline's per-batch rows)."""
    from gpu.graph._host import OpTable

    rng = np.random.default_rng(6)
    for n in (0, 1, 8, 300):
        op, status = rng.integers(0, 4, n).astype(np.int8), rng.integers(0, 3, n).astype(np.int8)
        z = np.zeros(n, np.int32)
        cols = (z, op, z, z, z.astype(np.int64), z.astype(np.int64), z, z.astype(np.int64),
                status, status)
        ops = OpTable(*cols)
        want = np.flatnonzero((ops.op <= 1) & (ops.status == 0))
        got = ops.applied_edges()
        assert got.dtype == np.int64 and np.array_equal(got, want)
        half = OpTable(*(c[n // 2:] for c in cols))
        assert np.array_equal(half.applied_edges(), want[want >= n // 2] - n // 2)


def test_insert_multiplicity_is_the_most_insertions_naming_one_vertex() -> None:
    rng = np.random.default_rng(4)
    for n in (0, 1, 7, 300):
        inp = np.full((4, n + 5), 99, np.int32)   # columns past n are not read
        inp[0, :n] = rng.integers(0, 2, n)
        inp[1:3, :n] = rng.integers(0, 12, (2, n))
        ins = inp[0, :n] == 0
        ends = np.concatenate([inp[1, :n][ins], inp[2, :n][ins]])
        want = int(np.bincount(ends).max()) if len(ends) else 0
        tally = np.zeros(12, np.int32)
        assert insert_multiplicity(inp, n, tally) == want, n
        assert not tally.any()   # left zeroed for the next launch


def test_the_pipelines_constants_equal_the_kernels() -> None:
    """The host picks apply_step's grid and lays out control blocks with numbers that
    kernels/update.cu defines too; a mismatch would give a launch too few resolver
    blocks or misread its words, and only a GPU run would show it."""
    import re
    from pathlib import Path

    from gpu.cuda import _pipeline as p
    from gpu.cuda._updater import _GW_WORDS, P_MAX, W_PROBE
    from gpu.cuda.kernels import BUILD_TILES, LF_GMAX, TILE, UPDATES_PER_BLOCK

    src = (Path(p.__file__).parent / "kernels" / "update.cu").read_text()
    defines = dict(re.findall(r"#define (\w+) (\d+)\b", src))
    assert int(defines["UPDATES_PER_BLOCK"]) == UPDATES_PER_BLOCK
    assert int(defines["TILE"]) == TILE
    assert int(defines["BUILD_TILES"]) == BUILD_TILES
    assert int(defines["LF_GMAX"]) == LF_GMAX
    assert int(defines["W_PROBE"]) == W_PROBE and int(defines["P_MAX"]) == P_MAX
    lf_words = re.search(r"enum \{ (L_I0 = 0,[^}]*)\}", src)
    assert lf_words is not None
    assert int(defines["W_LF"]) + len(lf_words.group(1).split(",")) - 1 <= _GW_WORDS
    words = re.search(r"enum \{ (C_N = 0,[^}]*)\}", src)
    assert words is not None
    names = [w.split("=")[0].strip() for w in words.group(1).split(",") if w.strip()]
    for i, name in enumerate(names[:-1]):   # the last is C_HDR = ...
        assert getattr(p, name) == i, name
    assert names[-1] == "C_HDR" and p.C_HDR == int(words.group(1).rsplit("=", 1)[1])
    dwords = re.search(r"enum \{ (D_PAIRS = 0,[^}]*)\}", src)
    assert dwords is not None
    dnames = [w.strip() for w in dwords.group(1).replace("= 0", "").split(",") if w.strip()]
    for i, name in enumerate(dnames):
        assert getattr(p, name) == i, name


def test_positional_records_equal_their_dataclass_and_stay_frozen() -> None:
    """The hot path's constructors (gpu/_records.py) build what ``__init__`` builds."""
    import dataclasses

    import pytest

    from gpu._records import positional
    from gpu._results import BatchStats

    make = positional(BatchStats)
    got = make(*range(13))
    assert got == BatchStats(*range(13))
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.updates = 1  # type: ignore[misc]

    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        x: int

    with pytest.raises(TypeError, match="slots"):
        positional(NoSlots)
