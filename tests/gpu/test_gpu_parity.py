"""The GPU executor equals the CPU executor, update by update (needs a CUDA device)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from _cases import churn_engine

from gpu import CountMode, Engine, Query, QuerySpec, UpdateBatch, UpdateOp
from streams import GenConfig, GraphData, generate, iter_chunks, read_graph, read_query, read_stream

pytestmark = pytest.mark.gpu

MODES = (CountMode.EMBEDDINGS, CountMode.SUBGRAPHS)


def _run(backend: str, initial: GraphData, queries: list[tuple[Query, CountMode]],
         stream: UpdateBatch, batch: int, *, listed: int | None = None,
         config: object = None) -> tuple[np.ndarray, list[np.ndarray]]:
    """Signed counts [ops x queries] and, for query index ``listed``, each batch's listed
    matches as rows (op index, vertices...) in lexicographic order. ``config``: a
    GpuConfig for the GPU executor."""
    if config is not None:
        from gpu.cuda._executor import GpuExecutor
        eng = Engine(executor=GpuExecutor(config))  # type: ignore[arg-type]
    else:
        eng = Engine(backend)
    g = initial
    eng.load_graph(g.vertex_ids, g.vertex_labels, g.src, g.dst, g.label)
    regs = []
    for i, (q, mode) in enumerate(queries):
        reg, _ = eng.register(QuerySpec(q, mode, list_matches=i == listed,
                                        max_matches_per_update=10**7))
        regs.append(reg.id)
    counts, lists = [], []
    for chunk in iter_chunks(stream, batch):
        res = eng.apply(chunk)
        counts.append(res.counts)
        if listed is not None:
            lst = res.listings[regs[listed]]
            rows = np.column_stack([np.repeat(lst.op_index, np.diff(lst.offsets)), lst.tuples])
            lists.append(rows[np.lexsort(rows.T[::-1])])
    return np.concatenate(counts), lists


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_generated_power_law_stream_with_deletions(seed: int) -> None:
    ds = generate(GenConfig(vertices=3000, edges=15000, labels=4, queries=4, max_query=6,
                            insert_ratio=0.3, delete_ratio=0.1, seed=seed))
    queries = [(q, m) for _, q in ds.queries for m in MODES]
    for batch in (64, 1000):
        cpu, cpu_rows = _run("cpu", ds.initial, queries, ds.stream, batch, listed=2)
        gpu, gpu_rows = _run("gpu", ds.initial, queries, ds.stream, batch, listed=2)
        assert np.array_equal(cpu, gpu), (seed, batch)
        assert len(cpu_rows) == len(gpu_rows)
        for a, b in zip(cpu_rows, gpu_rows, strict=True):
            assert np.array_equal(a, b)


def _clique(n: int, base: int) -> list[tuple[int, int]]:
    return [(base + i, base + j) for i in range(n) for j in range(i + 1, n)]


def test_one_huge_update_among_thousands_of_tiny_ones() -> None:
    # a 40-clique minus one edge; inserting that edge creates C(38, 3) 5-cliques,
    # while 4000 updates on a sparse ring create almost nothing
    dense = [e for e in _clique(40, 0) if e != (0, 1)]
    ring = [(1000 + i, 1000 + (i + 1) % 5000) for i in range(5000)]
    src = np.array([a for a, _ in dense + ring])
    dst = np.array([b for _, b in dense + ring])
    initial = GraphData(np.zeros(0, np.int64), np.zeros(0, np.int32), src, dst,
                        np.zeros(len(src), np.int32))
    rng = np.random.default_rng(3)
    xa = 1000 + rng.integers(0, 5000, 4000)
    xb = 1000 + rng.integers(0, 5000, 4000)
    ops = np.zeros(4001, np.int8)
    a = np.concatenate([xa[:2000], [0], xa[2000:]])
    b = np.concatenate([xb[:2000], [1], xb[2000:]])
    stream = UpdateBatch.build(np.arange(4001), ops, a, b, np.zeros(4001))
    k5 = Query.build([(v, None) for v in range(5)],
                     [(i, j, None) for i in range(5) for j in range(i + 1, 5)])
    queries = [(k5, CountMode.EMBEDDINGS), (k5, CountMode.SUBGRAPHS)]
    cpu, _ = _run("cpu", initial, queries, stream, 4001)
    gpu, _ = _run("gpu", initial, queries, stream, 4001)
    assert np.array_equal(cpu, gpu)
    assert int(gpu[2000, 1]) == 38 * 37 * 36 // 6


#: split at the first chance (every candidate move after a few cycles), with a queue
#: that has room and with one that fills at once (the warp then keeps the work)
SPLIT_ALWAYS = [dict(split_us=0.001, queue_records=1 << 15), dict(split_us=0.001, queue_records=8)]


@pytest.mark.parametrize("cfg", SPLIT_ALWAYS, ids=["queue", "full-queue"])
def test_sub_task_splitting_changes_nothing(cfg: dict) -> None:  # type: ignore[type-arg]
    """T-DFS splitting forced everywhere: counts and listed matches equal the CPU's."""
    from gpu.cuda._executor import GpuConfig

    config = GpuConfig(stack_bytes=1 << 30, **cfg)
    ds = generate(GenConfig(vertices=2000, edges=12000, labels=3, queries=4, min_query=4,
                            max_query=7, insert_ratio=0.3, delete_ratio=0.1, seed=11))
    queries = [(q, m) for _, q in ds.queries for m in MODES]
    for batch in (1, 64, 4000):
        cpu, cpu_rows = _run("cpu", ds.initial, queries, ds.stream.slice(0, 600), batch,
                             listed=1)
        gpu, gpu_rows = _run("gpu", ds.initial, queries, ds.stream.slice(0, 600), batch,
                             listed=1, config=config)
        assert np.array_equal(cpu, gpu), batch
        for a, b in zip(cpu_rows, gpu_rows, strict=True):
            assert np.array_equal(a, b)
    dense = [e for e in _clique(30, 0) if e != (0, 1)]
    src, dst = np.array([a for a, _ in dense]), np.array([b for _, b in dense])
    initial = GraphData(np.zeros(0, np.int64), np.zeros(0, np.int32), src, dst,
                        np.zeros(len(src), np.int32))
    k5 = Query.build([(v, None) for v in range(5)],
                     [(i, j, None) for i in range(5) for j in range(i + 1, 5)])
    stream = UpdateBatch.build([0], [UpdateOp.INSERT_EDGE], [0], [1], [0])
    for mode in MODES:
        _, rows = _run("gpu", initial, [(k5, mode)], stream, 1, listed=0, config=config)
        want = 28 * 27 * 26 // 6 * (120 if mode == CountMode.EMBEDDINGS else 1)
        assert len(rows[0]) == want and len(np.unique(rows[0], axis=0)) == want, mode


def test_hub_degree_beyond_any_fixed_stack() -> None:
    # a hub with 60k neighbours, some of them joined: triangles and 4-paths through it
    n = 60000
    rng = np.random.default_rng(8)
    leaves = np.arange(1, n + 1)
    extra_a = rng.integers(1, n + 1, 3000)
    extra_b = rng.integers(1, n + 1, 3000)
    initial = GraphData(np.zeros(0, np.int64), np.zeros(0, np.int32),
                        np.concatenate([np.zeros(n, np.int64), extra_a]),
                        np.concatenate([leaves, extra_b]), np.zeros(n + 3000, np.int32))
    ua = rng.integers(1, n + 1, 300)
    ub = rng.integers(1, n + 1, 300)
    ops = np.where(rng.random(300) < 0.3, UpdateOp.DELETE_EDGE, UpdateOp.INSERT_EDGE)
    stream = UpdateBatch.build(np.arange(300), ops, np.where(ops == 1, 0, ua), ub,
                               np.zeros(300))
    tri = Query.build([(v, None) for v in range(3)], [(0, 1, None), (1, 2, None), (0, 2, None)])
    path = Query.build([(v, None) for v in range(4)], [(0, 1, None), (1, 2, None), (2, 3, None),
                                                       (0, 3, None)])
    queries = [(tri, CountMode.SUBGRAPHS), (path, CountMode.SUBGRAPHS)]
    cpu, _ = _run("cpu", initial, queries, stream, 64)
    gpu, _ = _run("gpu", initial, queries, stream, 64)
    assert np.array_equal(cpu, gpu)


def test_device_memory_stays_flat_on_endless_churn() -> None:
    import cupy

    eng, churn = churn_engine("gpu")
    pool = cupy.get_default_memory_pool()
    used = []
    for rnd in range(80):
        churn(rnd)
        used.append(pool.used_bytes())
    assert max(used[40:]) <= max(used[:40])


def _yeast_dir() -> Path | None:
    for d in (os.environ.get("CSM_YEAST_DIR"), ".local-data/yeast",
              "../shared/data/divine-yeast-hprd/Yeast"):
        if d and (Path(d) / "data_graph.graph").exists():
            return Path(d)
    return None


@pytest.mark.slow
def test_yeast_insertion_and_deletion_totals_equal_cpu() -> None:
    d = _yeast_dir()
    if d is None:
        pytest.skip("Yeast data not found (set CSM_YEAST_DIR)")
    qs = [(read_query(d / "query_graphs" / f"query_graph-{i}.graph"), CountMode.EMBEDDINGS)
          for i in range(20)]
    for init, upd in (("initial_graph.graph", "insertion_graph.graph"),
                      ("data_graph.graph", "deletion_graph.graph")):
        g = read_graph(d / init, "csm")
        s = read_stream(d / upd, "csm")
        cpu, _ = _run("cpu", g, qs, s, 64)
        gpu, _ = _run("gpu", g, qs, s, 64)
        assert np.array_equal(cpu, gpu), init


def test_pipelined_batches_equal_cpu() -> None:
    """Batches submitted while earlier ones still match (inter-batch parallelism)."""
    ds = generate(GenConfig(vertices=3000, edges=15000, labels=4, queries=4, max_query=6,
                            insert_ratio=0.3, delete_ratio=0.1, seed=5))
    queries = [(q, m) for _, q in ds.queries for m in MODES]
    cpu, cpu_rows = _run("cpu", ds.initial, queries, ds.stream, 64, listed=2)
    eng = Engine("gpu")
    g = ds.initial
    eng.load_graph(g.vertex_ids, g.vertex_labels, g.src, g.dst, g.label)
    regs = [eng.register(QuerySpec(q, m, list_matches=i == 2, max_matches_per_update=10**7))[0]
            for i, (q, m) in enumerate(queries)]
    window: list = []
    results = []
    for chunk in iter_chunks(ds.stream, 64):
        window.append(eng.submit(chunk))
        if len(window) > 6:
            results.append(window.pop(0).result())
    results += [p.result() for p in window]
    gpu = np.concatenate([r.counts for r in results])
    assert np.array_equal(cpu, gpu)
    for res, want in zip(results, cpu_rows, strict=True):
        lst = res.listings[regs[2].id]
        rows = np.column_stack([np.repeat(lst.op_index, np.diff(lst.offsets)), lst.tuples])
        assert np.array_equal(rows[np.lexsort(rows.T[::-1])], want)
