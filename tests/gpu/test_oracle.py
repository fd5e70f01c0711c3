"""Every executor against networkx, update by update, in both counting modes."""

from __future__ import annotations

import numpy as np
import pytest
from _cases import Case, random_case
from _oracle import OracleGraph, automorphisms, embeddings, project

from gpu import CountMode, Engine, ExecutorOptions, Query, QuerySpec, UpdateOp, UpdateStatus
from gpu import _engine as engine_module
from gpu.cpu import _executor as cpu_executor
from gpu.cpu._sets import TOKEN_LIMIT, SetBuffers
from gpu.graph import _host as host_module
from gpu.planning._planner import C_LISTS, C_NEVER, C_STEADY, plan_query

#: (mode, list_matches) registered per query; count-only queries are planned one edge per
#: automorphism orbit and scaled (see plan_query), so they get their own registrations
SPECS = ((CountMode.EMBEDDINGS, True), (CountMode.SUBGRAPHS, True), (CountMode.EMBEDDINGS, False),
         (CountMode.SUBGRAPHS, False))
#: "cpu-cow": the CPU executor on a host graph that copies versions as it does for the GPU
BACKENDS = [pytest.param("cpu", id="cpu"), pytest.param("cpu-cow", id="cpu-cow"),
            pytest.param("gpu", id="gpu", marks=pytest.mark.gpu),
            pytest.param("gpu-mirror", id="gpu-mirror", marks=pytest.mark.gpu)]
STATUS = {UpdateStatus.APPLIED: "applied", UpdateStatus.IGNORED: "ignored",
          UpdateStatus.REJECTED: "rejected"}


def _engine(case: Case, backend: str) -> tuple[Engine, list[tuple[int, CountMode, bool]]]:
    # "gpu": the device owns the graph; "gpu-mirror": the host updater, mirrored
    eng = Engine(backend.removesuffix("-cow").removesuffix("-mirror"),
                 options=ExecutorOptions(device_graph=not backend.endswith("-mirror")))
    if backend.endswith("-cow"):
        eng.graph.copy_on_write = True
    vid = [v for v, _ in case.vertices]
    eng.load_graph(vid, [lab for _, lab in case.vertices], [a for a, _, _ in case.edges],
                   [b for _, b, _ in case.edges], [lab for _, _, lab in case.edges])
    regs = []
    for q in case.queries:
        for mode, listed in SPECS:
            reg, _ = eng.register(QuerySpec(q, mode, list_matches=listed,
                                            max_matches_per_update=10**6))
            regs.append((reg.id, mode, listed))
    return eng, regs


def _oracle_graph(case: Case) -> OracleGraph:
    og = OracleGraph()
    for v, lab in case.vertices:
        og.g.add_node(v, label=lab)
    for a, b, lab in case.edges:
        if a != b and not og.g.has_edge(a, b):
            og.g.add_edge(a, b, label=lab)
    return og


def _run_engine(case: Case, backend: str, batch_size: int):
    eng, regs = _engine(case, backend)
    got: dict[int, list] = {q: [] for q, _, _ in regs}
    statuses: list[str] = []
    for lo in range(0, len(case.updates), batch_size):
        batch = case.batch(lo, lo + batch_size)
        res = eng.apply(batch)
        raw_ops = batch.op[res.ops.raw]
        last = np.r_[res.ops.raw[1:] != res.ops.raw[:-1], True]
        statuses += [STATUS[UpdateStatus(s)] for s in res.ops.status[last]]
        is_edge = (res.ops.op <= UpdateOp.DELETE_EDGE) & (res.ops.status == UpdateStatus.APPLIED)
        for j, q in enumerate(res.query_ids):
            lst = res.listings.get(q)
            where = {int(o): r for r, o in enumerate(lst.op_index)} if lst else {}
            for i in np.flatnonzero(is_edge):
                c = int(res.counts[i, j])
                sign = 1 if res.ops.op[i] == UpdateOp.INSERT_EDGE else -1
                assert c == 0 or np.sign(c) == sign
                if lst is None:
                    found: set | int = abs(c)
                else:
                    rows = lst.rows_of(where[i]) if i in where else np.zeros((0, 1), np.int64)
                    tuples = [tuple(map(int, r)) for r in rows]
                    assert len(tuples) == abs(c)
                    assert len(set(tuples)) == len(tuples), "a match was listed twice"
                    found = set(tuples)
                got[q].append((int(res.seq[i]), int(raw_ops[i]), int(res.ops.src[i]),
                               int(res.ops.dst[i]), sign, found))
    return got, statuses, regs


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", range(150))
def test_matches_oracle_update_by_update(seed: int, backend: str) -> None:
    _check_oracle(seed, backend)


@pytest.mark.parametrize("least", [0, 1])
@pytest.mark.parametrize("seed", range(0, 150, 5))
def test_tasks_built_beside_the_merge_match_the_oracle(seed: int, least: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Every batch's merge and ended deletions beside the engine's building of its tasks
    and units (``HostGraph.apply``'s ``beside``; by default from 2,048 updates): with
    ``least`` 0 the set-up always goes to the other thread, with 1 a batch of deletions
    alone sends their ending there instead."""
    monkeypatch.setattr(host_module, "BESIDE_EDGES", least)
    monkeypatch.setattr(engine_module, "BESIDE_EDGES", least)
    _check_oracle(seed, "cpu")


@pytest.mark.parametrize("seed", range(0, 150, 10))
def test_marks_made_for_each_count_match_the_oracle(seed: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph too large to keep the threads' marks and weights (here: every graph) gets
    new ones for each count that earns them back, none for the others."""
    monkeypatch.setattr(cpu_executor, "SETS_KEEP_BYTES", 0)
    _check_oracle(seed, "cpu")


def _tokens_near_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept marks and weights start a few tokens before the end of int32 (SetBuffers), so
    the tokens wrap inside counts and between them, where every kept mark and weight must
    be forgotten."""
    make = SetBuffers._make

    def near_the_end(self: SetBuffers, cap: int) -> tuple[np.ndarray, ...]:
        made = make(self, cap)
        made[1][:, 3, 0] = TOKEN_LIMIT - 3
        made[4][:, 3] = np.iinfo(np.int32).max - 2
        return made

    monkeypatch.setattr(SetBuffers, "_make", near_the_end)


@pytest.mark.parametrize("seed", range(0, 150, 10))
def test_kept_marks_whose_tokens_wrap_match_the_oracle(seed: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """(marks wrap in 9 of these 15 cases)"""
    _tokens_near_the_end(monkeypatch)
    _check_oracle(seed, "cpu")


@pytest.mark.parametrize("seed", range(2))
def test_kept_weights_whose_tokens_wrap_match_the_oracle(seed: int,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """(the memoised last levels' cases weigh: marks and weights both wrap)"""
    _tokens_near_the_end(monkeypatch)
    test_memoised_last_levels_subtract_exactly_the_colliding_vertices(seed)


def _check_oracle(seed: int, backend: str) -> None:
    case = random_case(seed)
    expected = {}
    for qi, q in enumerate(case.queries):
        expected[qi] = _oracle_graph(case).run(case.updates, q)
    auts = [automorphisms(q) for q in case.queries]
    for batch_size in (1, 7, 64):
        got, statuses, regs = _run_engine(case, backend, batch_size)
        assert statuses == expected[0].statuses
        for k, (qid, mode, listed) in enumerate(regs):
            qi = k // len(SPECS)
            exp = expected[qi]
            assert len(got[qid]) == len(exp.records)
            for g, e in zip(got[qid], exp.records, strict=True):
                seq, op, x, y, sign, tuples = g
                assert (seq, op, sign) == (e[0], e[1], e[4])
                assert {x, y} == {e[2], e[3]}
                want = project(e[5], mode, auts[qi])
                if not listed:
                    assert tuples == len(want), (seed, batch_size, qid, seq)
                elif mode is CountMode.SUBGRAPHS:
                    # one representative per orbit, each a real embedding using the edge
                    assert tuples <= e[5]
                    assert {project({t}, mode, auts[qi]).pop() for t in tuples} == want
                    assert len(tuples) == len(want)
                else:
                    assert tuples == want, (seed, batch_size, qid, seq)


@pytest.mark.parametrize("seed", range(20))
def test_initial_matches_and_automorphism_identity(seed: int) -> None:
    case = random_case(seed + 10_000)
    og = _oracle_graph(case)
    eng = Engine("cpu")
    eng.load_graph([v for v, _ in case.vertices], [lab for _, lab in case.vertices],
                   [a for a, _, _ in case.edges], [b for _, b, _ in case.edges],
                   [lab for _, _, lab in case.edges])
    for q in case.queries:
        emb = embeddings(og.g, q)
        auts = automorphisms(q)
        r_e, init_e = eng.register(QuerySpec(q, CountMode.EMBEDDINGS, list_matches=True,
                                             max_matches_per_update=10**6), initial=True)
        r_c, init_c = eng.register(QuerySpec(q, CountMode.EMBEDDINGS), initial=True)
        assert int(init_c.counts[0, 0]) == len(emb)
        _, init_sc = eng.register(QuerySpec(q, CountMode.SUBGRAPHS), initial=True)
        assert int(init_sc.counts[0, 0]) == len(project(emb, CountMode.SUBGRAPHS, auts))
        r_s, init_s = eng.register(QuerySpec(q, CountMode.SUBGRAPHS, list_matches=True,
                                             max_matches_per_update=10**6), initial=True)
        assert r_e.automorphisms == len(auts)
        assert {tuple(map(int, t)) for t in init_e.listings[r_e.id].tuples} == emb
        n_e, n_s = int(init_e.counts[0, 0]), int(init_s.counts[0, 0])
        assert n_e == len(emb)
        assert n_e == r_s.automorphisms * n_s
        assert {project({tuple(map(int, t))}, CountMode.SUBGRAPHS, auts).pop()
                for t in init_s.listings[r_s.id].tuples} == project(emb, CountMode.SUBGRAPHS,
                                                                    auts)


@pytest.mark.parametrize("seed", range(12))
def test_a_query_registered_later_sees_the_edges_left_pending(seed: int) -> None:
    """In place, edges no standing query reads stay pending across batches (here every
    edge: the one standing query reads a label no vertex has); a query registered after
    the stream must still see all of them, and match them from then on."""
    case = random_case(seed + 20_000, n_updates=120)
    og = _oracle_graph(case)
    eng = Engine("cpu")
    eng.load_graph([v for v, _ in case.vertices], [lab for _, lab in case.vertices],
                   [a for a, _, _ in case.edges], [b for _, b, _ in case.edges],
                   [lab for _, _, lab in case.edges])
    other = Query.build([(0, 7), (1, 7)], [(0, 1, None)])
    eng.register(QuerySpec(other, CountMode.EMBEDDINGS))
    half = len(case.updates) // 2
    for lo in range(0, half, 9):
        eng.apply(case.batch(lo, min(lo + 9, half)))
    og.run(case.updates[:half], other)
    for q in case.queries:
        _, init = eng.register(QuerySpec(q, CountMode.EMBEDDINGS), initial=True)
        assert int(init.counts[0, 0]) == len(embeddings(og.g, q)), seed
    eng.apply(case.batch(half, None))
    og.run(case.updates[half:], other)
    for q in case.queries:
        _, now = eng.register(QuerySpec(q, CountMode.EMBEDDINGS), initial=True)
        assert int(now.counts[0, 0]) == len(embeddings(og.g, q)), seed


#: 5-vertex queries whose count plans memoise their last level (a cycle closed at a root)
#: and subtract bound vertices of its label: the query's own edges say for some of them
#: that they are candidates (same edge label or a wildcard), that they never are (another
#: edge label), or leave a list to search (a wildcard edge, a missing chord)
_MEMO_QUERIES = (
    Query.build([(0, 0), (1, 1), (2, 0), (3, 0), (4, 1)],
                [(0, 1, None), (1, 2, None), (2, 3, None), (3, 4, None), (0, 4, None)]),
    Query.build([(0, 0), (1, 1), (2, 0), (3, 0), (4, 1)],
                [(0, 1, 0), (1, 2, 1), (2, 3, None), (3, 4, 0), (0, 4, 1)]),
    Query.build([(0, 0), (1, 0), (2, 0), (3, 0), (4, 0)],
                [(0, 1, 1), (1, 2, 0), (2, 3, 1), (3, 4, None), (0, 4, 0)]),
    Query.build([(0, 0), (1, 0), (2, 0), (3, 0), (4, 1)],
                [(0, 1, None), (1, 2, 0), (2, 3, 0), (3, 4, 1), (0, 4, None), (1, 3, 0)]),
)


def _dense_case(seed: int, queries: list[Query]) -> Case:
    """A dense graph of 14 vertices with two vertex and two edge labels, 30 insertions
    then 30 deletions, and ``queries``."""
    rng = np.random.default_rng(seed + 30_000)
    nv = 14
    vertices = [(v, int(rng.integers(0, 2))) for v in range(nv)]
    pairs = [(a, b) for a in range(nv) for b in range(a + 1, nv)]
    pick = rng.permutation(len(pairs))
    edges = [(*pairs[i], int(rng.integers(0, 2))) for i in pick[:45]]
    updates = []
    for s, i in enumerate(pick[45:75]):
        updates.append((1000 + s, int(UpdateOp.INSERT_EDGE), *pairs[i], int(rng.integers(0, 2))))
    for s, i in enumerate(rng.permutation(pick[:75])[:30]):
        updates.append((2000 + s, int(UpdateOp.DELETE_EDGE), *pairs[i], 0))
    return Case(vertices, edges, queries, updates)


def _count_only_against_oracle(case: Case, seed: int) -> None:
    """Every query of ``case`` registered count-only in both modes on the CPU, its counts
    update by update equal to the oracle's, at batch sizes 1 and 64."""
    want = {}
    for qi, q in enumerate(case.queries):
        exp = _oracle_graph(case).run(case.updates, q)
        auts = automorphisms(q)
        for mode in CountMode:
            want[qi, mode] = [len(project(r[5], mode, auts)) for r in exp.records]
    for batch_size in (1, 64):
        eng = Engine("cpu")
        eng.load_graph([v for v, _ in case.vertices], [lab for _, lab in case.vertices],
                       [a for a, _, _ in case.edges], [b for _, b, _ in case.edges],
                       [lab for _, _, lab in case.edges])
        regs = [(qi, mode, eng.register(QuerySpec(q, mode))[0].id)
                for qi, q in enumerate(case.queries) for mode in CountMode]
        got: dict[int, list[int]] = {rid: [] for _, _, rid in regs}
        for lo in range(0, len(case.updates), batch_size):
            res = eng.apply(case.batch(lo, lo + batch_size))
            applied = np.flatnonzero(res.ops.status == UpdateStatus.APPLIED)
            for j, q in enumerate(res.query_ids):
                got[q] += [abs(int(c)) for c in res.counts[applied, j]]
        for qi, mode, rid in regs:
            assert got[rid] == want[qi, mode], (seed, batch_size, qi, mode)


@pytest.mark.parametrize("seed", range(4))
def test_memoised_last_levels_subtract_exactly_the_colliding_vertices(seed: int) -> None:
    """Count-only plans of cycles (``run_plan``'s memoised last level) against the oracle,
    update by update, on a dense graph with two vertex and two edge labels; the collision
    words (``collisions``) cover every case among these plans."""
    case = _dense_case(seed, list(_MEMO_QUERIES))
    words = 0
    for q in case.queries:
        for mode in CountMode:
            qp = plan_query(q, mode)
            for plan in [*qp.plans, *(p for p, _ in qp.orbit_plans)]:
                for w in plan.collide:
                    words |= (w & (C_NEVER | C_STEADY)) | (C_LISTS if w & C_LISTS else 0)
    assert words == C_NEVER | C_STEADY | C_LISTS   # each kind of word occurs
    _count_only_against_oracle(case, seed)


#: paws (a triangle with a tail, Enron's q4 shape): an update on the tail edge counts the
#: triangles through one end, the last level on the marks of that end's list
_PAW_QUERIES = (
    Query.build([(0, 0), (1, 1), (2, 0), (3, 0)],
                [(0, 1, None), (1, 2, None), (0, 2, None), (2, 3, None)]),
    Query.build([(0, 0), (1, 1), (2, 0), (3, 1)],
                [(0, 1, 0), (1, 2, None), (0, 2, 1), (2, 3, None)]),
    Query.build([(0, 0), (1, 0), (2, 0), (3, 0)],
                [(0, 1, None), (1, 2, 1), (0, 2, 0), (2, 3, None)]),
)


@pytest.mark.parametrize("seed", range(3))
def test_paws_match_the_oracle_on_a_dense_labelled_graph(seed: int) -> None:
    """Paws with vertex and edge labels and wildcards, count-only in both modes, update
    by update against the oracle."""
    _count_only_against_oracle(_dense_case(seed, list(_PAW_QUERIES)), seed)


def _hub_case(seed: int, queries: list[Query]) -> Case:
    """72 vertices with two vertex and two edge labels, two hubs adjacent to most of them
    (label ranges of 50 and more beside common-neighbour sets of a few), a sparse
    rest, 16 insertions then 16 deletions, and ``queries``."""
    rng = np.random.default_rng(seed + 40_000)
    nv = 72
    # label 0 for the hubs and most others: a hub's range of it is far longer than the
    # roots' common neighbours (``_count_tail`` searches those in it)
    vertices = [(v, int(v >= 2 and rng.random() < 0.2)) for v in range(nv)]
    pairs = [(a, b) for a in range(nv) for b in range(a + 1, nv)
             if a < 2 and rng.random() < 0.95 or rng.random() < 0.07]
    pick = rng.permutation(len(pairs))
    n0 = len(pairs) - 16
    edges = [(*pairs[i], int(rng.integers(0, 2))) for i in pick[:n0]]
    updates = [(1000 + s, int(UpdateOp.INSERT_EDGE), *pairs[i], int(rng.integers(0, 2)))
               for s, i in enumerate(pick[n0:])]
    updates += [(2000 + s, int(UpdateOp.DELETE_EDGE), *pairs[i], 0)
                for s, i in enumerate(rng.permutation(pick)[:16])]
    return Case(vertices, edges, queries, updates)


#: 4-cliques and diamonds (Enron's q3 shape and a 4-cycle with a chord): the last level
#: intersects a candidate's list with a set bound above it (``_count_tail``): one list, the
#: set of level 2 reused (searched in a hub's long list when it is short), or two lists
_CLIQUE_QUERIES = (
    Query.build([(0, 0), (1, 1), (2, 0), (3, 0)],
                [(0, 1, None), (0, 2, None), (0, 3, None), (1, 2, None), (1, 3, None),
                 (2, 3, None)]),
    Query.build([(0, 0), (1, 0), (2, 0), (3, 0)],
                [(0, 1, None), (0, 2, 1), (0, 3, None), (1, 2, None), (1, 3, 0),
                 (2, 3, None)]),
    Query.build([(0, 0), (1, 1), (2, 0), (3, 1)],
                [(0, 1, None), (1, 2, None), (2, 3, None), (3, 0, None), (0, 2, 0)]),
    Query.build([(0, 0), (1, 0), (2, 1), (3, 1)],
                [(0, 1, None), (1, 2, None), (2, 3, None), (3, 0, None), (0, 2, None),
                 (1, 3, 1)]),
)


@pytest.mark.parametrize("seed", range(2))
def test_cliques_and_diamonds_match_the_oracle_beside_hubs(seed: int) -> None:
    """4-cliques and diamonds with vertex and edge labels and wildcards, count-only in
    both modes, update by update against the oracle, on a graph with two hubs."""
    _count_only_against_oracle(_hub_case(seed, list(_CLIQUE_QUERIES)), seed)
