"""The device pipeline's compiled host columns (gpu/cuda/_host_columns.py) against the
numpy they replace; CPU only (they read host memory)."""

from __future__ import annotations

import numpy as np

from gpu._result_columns import result_columns
from gpu.cuda._host_columns import (
    ResultRows,
    insert_multiplicity,
    intern_ends,
    note_ext,
    read_batch,
    stage_rows,
)
from gpu.graph import IdMap


def _block(rng: np.random.Generator, cap: int) -> np.ndarray:
    """A control block's output rows: a, b, label, tick, status, reason."""
    out = rng.integers(-1, 1000, (6, cap)).astype(np.int64)
    out[4] = rng.integers(0, 3, cap)   # statuses
    return out


def test_read_batch_equals_the_separate_readings() -> None:
    """Columns, applied indices, signed scaled counts, tally and external ids as the
    numpy reading, applied_edges, result_columns and note_ext gave them."""
    from gpu.graph._host import OpTable

    rng = np.random.default_rng(3)
    cap, lo, at = 64, 11, 7
    for n, nq in ((37, 2), (1, 1), (0, 3)):
        out = _block(rng, cap)
        op = rng.integers(0, 2, n).astype(np.int8)
        src = rng.integers(0, 1 << 40, n).astype(np.int64)
        dst = rng.integers(0, 1 << 40, n).astype(np.int64)
        ctrl = rng.integers(0, 50, at + n * nq).astype(np.int64)
        scale = np.array([rng.integers(1, 5, nq), rng.integers(1, 3, nq)], np.int64)
        vext = np.zeros(1000, np.int64)
        cols, ei, counts, sub, tally = read_batch(out, ctrl, lo, at, op, src, dst, scale[0],
                                                  scale[1], vext)
        c = out[:, lo:lo + n]
        want = (np.arange(n, dtype=np.int32), op, c[0].astype(np.int32),
                c[1].astype(np.int32), src, dst, c[2].astype(np.int32), c[3],
                c[4].astype(np.int8), c[5].astype(np.int8))
        for g, w in zip(cols, want, strict=True):
            assert g.dtype == w.dtype and np.array_equal(g, w)
        assert not np.shares_memory(cols[1], op) and not np.shares_memory(cols[4], src)
        ops = OpTable(*want)
        want_ei = ops.applied_edges()
        assert np.array_equal(ei, want_ei)
        w_counts, w_sub, w_tally = result_columns(
            ops.raw, ops.status, ops.op, want_ei, ctrl[at:at + len(want_ei) * nq], scale[0],
            scale[1])
        assert np.array_equal(counts, w_counts) and np.array_equal(sub, w_sub)
        assert np.array_equal(tally, w_tally)
        w_ext = np.zeros(1000, np.int64)
        note_ext(w_ext, ops.a, ops.src, ops.b, ops.dst)
        assert np.array_equal(vext, w_ext)


def test_result_rows_of_parts_equal_the_parts_concatenated() -> None:
    """A split batch's parts read (or put, as a part the host path finished) straight into
    its columns give what concatenating each part's own columns gave: raw and applied
    indices offset by the part's first row, counts in row order, tallies summed."""
    rng = np.random.default_rng(5)
    nq, cap = 2, 64
    sizes = (37, 1, 0, 20, 9)
    scale = np.array([rng.integers(1, 5, nq), rng.integers(1, 3, nq)], np.int64)
    rows, want, vext = ResultRows(sum(sizes), nq), [], np.zeros(1000, np.int64)
    row0 = 0
    for part, n in enumerate(sizes):
        out, lo, at = _block(rng, cap), int(rng.integers(0, cap - n + 1)), 3
        op = rng.integers(0, 2, n).astype(np.int8)
        src = rng.integers(0, 1 << 40, n).astype(np.int64)
        dst = rng.integers(0, 1 << 40, n).astype(np.int64)
        ctrl = rng.integers(-9, 50, at + n * nq).astype(np.int64)
        got = read_batch(out, ctrl, lo, at, op, src, dst, scale[0], scale[1], vext)
        want.append(got)
        if part == 3:
            cols, ei, counts, sub, tally = got
            rows.put(cols, ei, counts, sub, tally, row0)
        else:
            k = rows.read(out, ctrl, lo, at, op, src, dst, scale[0], scale[1], vext, row0)
            assert k == len(got[1])
        row0 += n
    cols, ei, counts, sub, tally = rows.columns()
    at = [int(x) for x in np.cumsum([0, *sizes[:-1]])]
    for f, col in enumerate(cols):
        parts = [w[0][f] + (o if f == 0 else 0) for w, o in zip(want, at, strict=True)]
        assert col.dtype == parts[0].dtype and np.array_equal(col, np.concatenate(parts))
    assert np.array_equal(ei, np.concatenate([w[1] + o for w, o in zip(want, at, strict=True)]))
    assert np.array_equal(counts, np.concatenate([w[2] for w in want]))
    assert np.array_equal(sub, np.concatenate([w[3] for w in want]))
    assert np.array_equal(tally, np.sum([w[4] for w in want], axis=0))


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
    k = stage_rows(maps[0].keys, maps[0].vals, maps[0].used, maps[0].direct, op, src, dst,
                   label, 2, 3, new_a, inp, at)
    sx, sy = np.empty(n, np.int32), np.empty(n, np.int32)
    assert k == intern_ends(maps[1].keys, maps[1].vals, maps[1].used, maps[1].direct, op, src,
                            dst, 2, 3, new_b, sx, sy)
    assert np.array_equal(new_a[:k], new_b[:k])
    assert np.array_equal(inp[:, at:at + n], np.array([op, sx, sy, label], np.int32))
    assert (inp[:, :at] == -7).all() and (inp[:, at + n:] == -7).all()


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
        cols, *_ = read_batch(_block(rng, 512), np.zeros(0, np.int64), 5, 0,
                              rng.integers(0, 4, n).astype(np.int8), np.zeros(n, np.int64),
                              np.zeros(n, np.int64), np.zeros(0, np.int64),
                              np.ones(0, np.int64), np.zeros(1000, np.int64))
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
    for i, name in enumerate(names[:-1]):   # the last is C_HDR = 16
        assert getattr(p, name) == i, name
    assert p.C_HDR == 16
