"""Out-of-core mode (GCSM): the pool in host memory, a per-batch device cache, zero-copy
for the rest. Results equal the in-memory GPU mode and the CPU executor, update by update,
for every cache policy (needs a CUDA device)."""

from __future__ import annotations

import numpy as np
import pytest
from _batches import task_batch, triangle

from gpu import CountMode, Engine, Executor, ExecutorOptions, Query, QuerySpec, UpdateBatch
from gpu.cuda._device_graph import ENTRY_BYTES
from gpu.ooc._estimate import exact_reads
from streams import GenConfig, GraphData, generate, iter_chunks

pytestmark = pytest.mark.gpu

POLICIES = ("walk", "degree", "none")


def _run(backend: str, initial: GraphData, queries: list[Query], stream: UpdateBatch,
         batch: int, options: ExecutorOptions | None = None,
         executor: Executor | None = None):  # type: ignore[no-untyped-def]
    """Signed counts of every query; every listed match of the last query (sorted rows)."""
    eng = Engine(backend, executor=executor, options=options)
    g = initial
    eng.load_graph(g.vertex_ids, g.vertex_labels, g.src, g.dst, g.label)
    for i, q in enumerate(queries):
        eng.register(QuerySpec(q, CountMode.EMBEDDINGS, list_matches=i == len(queries) - 1,
                               max_matches_per_update=10**7))
    counts, rows, io = [], [], np.zeros(3, np.int64)
    for chunk in iter_chunks(stream, batch):
        res = eng.apply(chunk)
        counts.append(res.counts)
        lst = res.listings[eng.queries[-1].id]
        r = np.column_stack([np.repeat(lst.op_index, np.diff(lst.offsets)), lst.tuples])
        rows.append(r[np.lexsort(r.T[::-1])])
        io += (res.stats.host_bytes, res.stats.cache_hits, res.stats.cache_misses)
    return eng, np.concatenate(counts), np.concatenate(rows), io


@pytest.fixture(scope="module")
def data():  # type: ignore[no-untyped-def]
    ds = generate(GenConfig(vertices=3000, edges=15000, labels=8, queries=4, max_query=5,
                            insert_ratio=0.3, delete_ratio=0.1, seed=11))
    queries = [q for _, q in ds.queries]
    ref = {b: _run("cpu", ds.initial, queries, ds.stream, b)[1:3] for b in (64, 1000)}
    return ds, queries, ref


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("batch", [64, 1000])
def test_parity_with_most_of_the_graph_on_the_host(data, policy: str, batch: int) -> None:  # type: ignore[no-untyped-def]
    ds, queries, ref = data
    pool = 2 * len(ds.graph.src) * ENTRY_BYTES
    opts = ExecutorOptions(graph_budget_bytes=pool // 10, cache=policy)
    eng, counts, rows, io = _run("gpu", ds.initial, queries, ds.stream, batch, opts)
    assert eng.executor.out_of_core                 # type: ignore[attr-defined]
    assert np.array_equal(counts, ref[batch][0])
    assert np.array_equal(rows, ref[batch][1])
    assert io[0] > 0                                 # zero-copy reads happened
    if policy == "none":
        assert io[1] == 0
    else:
        assert io[1] > 0


@pytest.mark.parametrize("slots", [2, 4])
def test_parity_whatever_the_batches_in_flight_per_cache(data, slots: int) -> None:  # type: ignore[no-untyped-def]
    # caches taken in turns (2 for 4 batches in flight) or one per batch in flight; the
    # default (one cache for all) is covered above. Listings of a batch whose shared cache
    # was reloaded meanwhile come from host memory.
    from gpu.cuda._executor import GpuConfig, GpuExecutor

    ds, queries, ref = data
    pool = 2 * len(ds.graph.src) * ENTRY_BYTES
    ex = GpuExecutor(GpuConfig(graph_budget_bytes=pool // 10, cache_slots=slots))
    _, counts, rows, io = _run("gpu", ds.initial, queries, ds.stream, 64, executor=ex)
    assert np.array_equal(counts, ref[64][0]) and np.array_equal(rows, ref[64][1])
    assert io[1] > 0


def test_in_memory_gpu_mode_is_unchanged(data) -> None:  # type: ignore[no-untyped-def]
    ds, queries, ref = data
    eng, counts, rows, io = _run("gpu", ds.initial, queries, ds.stream, 1000)
    assert not eng.executor.out_of_core              # type: ignore[attr-defined]
    assert np.array_equal(counts, ref[1000][0]) and np.array_equal(rows, ref[1000][1])
    assert not io.any()


def test_walk_cache_moves_fewer_host_bytes_than_zero_copy(data) -> None:  # type: ignore[no-untyped-def]
    ds, queries, _ = data
    pool = 2 * len(ds.graph.src) * ENTRY_BYTES
    got = {p: _run("gpu", ds.initial, queries, ds.stream, 1000,
                   ExecutorOptions(graph_budget_bytes=pool // 10, cache=p))[3][0]
           for p in ("walk", "none")}
    assert got["walk"] < got["none"]


@pytest.mark.parametrize("budget", [0, 1])
def test_kernel_read_counts_equal_the_model_on_triangles(budget: int) -> None:
    # the debug counter of the kernel's neighbour-array reads is the estimator's ground
    # truth; for triangles it must equal the model's exact counts, in both modes
    eng, ps, tasks = task_batch("gpu", queries=[triangle()], graph_budget_bytes=budget,
                                device_graph=False)   # the model reads the host graph
    assert eng.executor.out_of_core == (budget > 0)  # type: ignore[attr-defined]
    got = eng.executor.read_counts(eng.graph, ps, tasks)  # type: ignore[attr-defined]
    assert np.array_equal(got, exact_reads(eng.graph, ps, tasks).astype(np.int64))


def test_graph_growth_while_out_of_core() -> None:
    # inserts grow the pool past its capacity: the pinned pool is reallocated (drained
    # first) and results stay exact
    ds = generate(GenConfig(vertices=2000, edges=12000, labels=6, queries=2, max_query=5,
                            insert_ratio=0.8, delete_ratio=0.05, seed=5))
    queries = [q for _, q in ds.queries]
    _, cpu, cpu_rows, _ = _run("cpu", ds.initial, queries, ds.stream, 500)
    eng, gpu, gpu_rows, _ = _run("gpu", ds.initial, queries, ds.stream, 500,
                                 ExecutorOptions(graph_budget_bytes=4096))
    assert eng.executor.out_of_core                  # type: ignore[attr-defined]
    assert np.array_equal(cpu, gpu) and np.array_equal(cpu_rows, gpu_rows)


@pytest.mark.parametrize("slots", [0, 5])
def test_cache_slots_outside_one_to_depth_are_refused(slots: int) -> None:
    from gpu import BackendError
    from gpu.cuda._executor import GpuConfig, GpuExecutor

    with pytest.raises(BackendError, match="cache_slots must be 1..depth"):
        GpuExecutor(GpuConfig(graph_budget_bytes=1 << 20, cache_slots=slots))
