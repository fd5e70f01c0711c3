"""The random-walk read estimator (GCSM section 2.4): unbiased, and it finds the vertices
the matching reads most (runs on the CPU; no device needed)."""

from __future__ import annotations

import numpy as np
import pytest
from _batches import task_batch, triangle

from gpu._executor import plan_units
from gpu.ooc._estimate import WalkConfig, estimate_reads, exact_reads


@pytest.fixture(scope="module")
def batch():  # type: ignore[no-untyped-def]
    eng, ps, tasks = task_batch()
    return eng, ps, tasks, exact_reads(eng.graph, ps, tasks)


def _estimates(eng, ps, tasks, exact, seeds, walks, branching, weigh=False):  # type: ignore[no-untyped-def]
    out = np.zeros((len(seeds), len(exact)))
    for i, s in enumerate(seeds):
        e = estimate_reads(eng.graph, ps, tasks, WalkConfig(walks=walks, max_walks=walks,
                                                            seed=s, branching=branching,
                                                            weigh_bytes=weigh),
                           lambda v, r: np.arange(min(100, len(v))))
        assert e.walks == walks
        out[i, e.vertices] = e.reads
    return out


def test_exact_model_counts_on_triangles() -> None:
    # a triangle plan reads both endpoints' arrays once per (task, plan) root whose
    # endpoints pass the degree filter (>= 2); plans without symmetry conditions, which
    # would skip roots before reading
    eng, ps, tasks = task_batch(queries=[triangle()], list_matches=True)
    exact = exact_reads(eng.graph, ps, tasks)
    owner, _ = plan_units(tasks)
    a, b = tasks.a[owner], tasks.b[owner]
    ok = (eng.graph.seg_len[a] >= 2) & (eng.graph.seg_len[b] >= 2)
    want = np.bincount(np.concatenate([a[ok], b[ok]]), minlength=len(exact)).astype(float)
    assert np.array_equal(exact, want)


@pytest.mark.parametrize("weigh", [False, True], ids=["reads", "bytes"])
@pytest.mark.parametrize("branching", [False, True], ids=["formula3", "branching"])
def test_estimates_are_unbiased_within_sampling_error(batch, branching: bool,  # type: ignore[no-untyped-def]
                                                      weigh: bool) -> None:
    eng, ps, tasks, _ = batch
    exact = exact_reads(eng.graph, ps, tasks, weigh_bytes=weigh)
    # formula (3)'s walks mostly die early, so its estimates are heavy-tailed: 40 of
    # them can put one of 31 means past 4 standard errors (seen); it gets 160
    seeds = 40 if branching else 160
    est = _estimates(eng, ps, tasks, exact, range(seeds), 8192, branching, weigh)
    # the total and each of the 30 most-read vertices: mean of the independent estimates
    # within 4 standard errors of the exact count
    for got, want in [(est.sum(axis=1), exact.sum())] + [
            (est[:, v], exact[v]) for v in np.argsort(-exact)[:30]]:
        se = got.std(ddof=1) / np.sqrt(len(got))
        assert abs(got.mean() - want) <= 4 * se + 1e-9 * want, (want, got.mean(), se)


def test_estimate_covers_the_most_read_vertices(batch) -> None:  # type: ignore[no-untyped-def]
    # GCSM Fig. 28b: share of the exact top 1% / 5% in a cache of the top 10% estimated
    eng, ps, tasks, exact = batch
    read = int((exact > 0).sum())
    e = estimate_reads(eng.graph, ps, tasks, WalkConfig(walks=65536, max_walks=65536,
                                                        weigh_bytes=False),
                       lambda v, r: np.arange(min(100, len(v))))
    cached = set(e.vertices[: read // 10].tolist())
    top = np.argsort(-exact, kind="stable")
    for share, floor in ((0.01, 0.95), (0.05, 0.8)):   # measured: 1.0 and 0.85
        k = max(1, int(share * read))
        got = len(cached & set(top[:k].tolist())) / k
        assert got >= floor, (share, got)


def test_formula_5_adds_walks_up_to_the_bound(batch) -> None:  # type: ignore[no-untyped-def]
    eng, ps, tasks, _ = batch
    e = estimate_reads(eng.graph, ps, tasks, WalkConfig(walks=1000, max_walks=5000),
                       lambda v, r: np.arange(len(v)))
    assert e.walks == 5000          # skewed graph: (5) asks for more than the bound
    again = estimate_reads(eng.graph, ps, tasks, WalkConfig(walks=1000, max_walks=5000),
                           lambda v, r: np.arange(len(v)))
    assert np.array_equal(e.vertices, again.vertices)   # seeded: reproducible
    assert np.array_equal(e.reads, again.reads)
