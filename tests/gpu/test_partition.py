"""SMs left free of matching for the updater (the match lanes in a green context,
gpu/cuda/_partition.py): the device pipeline stays exact against the CPU engine, and a
split the device cannot make is a clear error (needs a CUDA device)."""

from __future__ import annotations

import numpy as np
import pytest
from _batches import raw_stream, triangle

from gpu import CountMode, Engine, ExecutorOptions, QuerySpec
from gpu.cuda._executor import GpuConfig, GpuExecutor
from gpu.exceptions import BackendError
from streams import GenConfig, generate


def _partitioned(front_sms: int) -> Engine:
    return Engine("gpu", executor=GpuExecutor(GpuConfig(device_graph=True,
                                                        front_sms=front_sms)))


@pytest.mark.gpu
@pytest.mark.parametrize("front_sms", [8, 16])
def test_the_pipeline_on_two_partitions_equals_the_cpu(front_sms: int) -> None:
    ds = generate(GenConfig(vertices=3000, edges=15000, labels=4, queries=3, max_query=5,
                            insert_ratio=0.45, delete_ratio=0.05, seed=front_sms))
    queries = [(q, CountMode.SUBGRAPHS) for _, q in ds.queries]
    queries += [(triangle(), CountMode.EMBEDDINGS)]
    cpu, gpu = Engine("cpu"), _partitioned(front_sms)
    g = ds.initial
    for eng in (cpu, gpu):
        eng.load_graph(g.vertex_ids, g.vertex_labels, g.src, g.dst, g.label)
        for q, mode in queries:
            eng.register(QuerySpec(q, mode))
    ex = gpu.executor
    assert isinstance(ex, GpuExecutor) and ex.partition is not None
    part = ex.partition
    assert part.front_sms >= front_sms and ex.sm_count == part.match_sms
    rng = np.random.default_rng(front_sms)
    cuts = np.sort(rng.choice(np.arange(1, len(ds.stream)), 150, replace=False))
    chunks = [ds.stream.slice(int(a), int(b))
              for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(ds.stream)], strict=True)]
    expected = [cpu.apply(c) for c in chunks]
    pending = [gpu.submit(c) for c in chunks]     # every size from 1 to a few thousand
    for j in rng.permutation(len(chunks)):        # all in flight, read in random order
        got, want = pending[j].result(), expected[j]
        assert np.array_equal(want.counts, got.counts), j
        for col in ("status", "tick", "a", "b", "label", "reason"):
            assert np.array_equal(getattr(want.ops, col), getattr(got.ops, col)), (j, col)
    assert ex._pipeline is not None and ex._pipeline.launches > 0


@pytest.mark.gpu
def test_hubs_and_vertex_operations_on_two_partitions() -> None:
    stream = raw_stream(5, 6000, 300, hub_every=7, vertex_ops=0.01)
    cpu, gpu = Engine("cpu"), _partitioned(16)
    for eng in (cpu, gpu):
        eng.register(QuerySpec(triangle(), CountMode.SUBGRAPHS))
    pending = [gpu.submit(stream.slice(i, i + 97)) for i in range(0, len(stream), 97)]
    for i, p in zip(range(0, len(stream), 97), pending, strict=True):
        want = cpu.apply(stream.slice(i, i + 97))
        assert np.array_equal(want.counts, p.result().counts), i


@pytest.mark.gpu
def test_a_split_the_device_cannot_make_names_front_sms() -> None:
    with pytest.raises(BackendError, match="front_sms"):
        _partitioned(100_000)


def test_a_negative_front_sms_is_named() -> None:
    with pytest.raises(BackendError, match="front_sms"):
        ExecutorOptions(front_sms=-1)


@pytest.mark.gpu
def test_front_sms_rounded_to_the_granule_is_one_split() -> None:
    from gpu.cuda._partition import partition

    a, b = partition(0, 1), partition(0, 8)   # (the granule is 8 SMs on sm_90)
    assert a is b and a.front_sms == 8
