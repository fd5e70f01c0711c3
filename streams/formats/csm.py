"""The CSM-benchmark text format (RapidFlow, the CSM study, DIVINE, GCSM).

Graphs and queries: ``v <id> <label>`` and ``e <u> <v> [<label>]`` (an optional
``t <#v> <#e>`` header is skipped). Streams: ``v <id> <label>``, ``-v <id>``,
``e <u> <v> [<label>]``, ``-e <u> <v> [<label>]``; the update's sequence number is its
position in the file. Query files may use ``*`` as a wildcard label (our extension).
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

import numpy as np

from gpu import Query, QueryError, UpdateBatch, UpdateOp

from ._common import GraphData, Lines, graph_data

__all__ = ["read_graph", "read_query", "read_stream", "write_graph", "write_query",
           "write_stream"]

_OPS = {"e": UpdateOp.INSERT_EDGE, "-e": UpdateOp.DELETE_EDGE,
        "v": UpdateOp.INSERT_VERTEX, "-v": UpdateOp.DELETE_VERTEX}


def read_graph(path: str | Path) -> GraphData:
    lines = Lines(path)
    vids, vlabels, src, dst, labels = [], [], [], [], []
    declared: dict[int, int] = {}
    for no, t in lines:
        kind = t[0]
        if kind == "v":
            lines.arity(t, no, 3, 3, "a vertex line 'v <id> <label>'")
            v = lines.vid(t[1], no)
            if v in declared:
                raise lines.error(no, f"vertex {v} is declared twice (first on line "
                                      f"{declared[v]})")
            declared[v] = no
            vids.append(v)
            vlabels.append(lines.label(t[2], no))
        elif kind == "e":
            lines.arity(t, no, 3, 4, "an edge line 'e <u> <v> [<label>]'")
            src.append(lines.vid(t[1], no))
            dst.append(lines.vid(t[2], no))
            labels.append(lines.label(t[3], no) if len(t) == 4 else 0)
        elif kind == "t":
            continue
        else:
            raise lines.error(no, f"unknown line type {kind!r} (expected 'v', 'e' or 't')")
    return graph_data(vids, vlabels, src, dst, labels)  # type: ignore[arg-type]


def read_stream(path: str | Path, first_seq: int = 0) -> UpdateBatch:
    lines = Lines(path)
    ops, src, dst, labels = [], [], [], []
    for no, t in lines:
        op = _OPS.get(t[0])
        if op is None:
            raise lines.error(no, f"unknown operation {t[0]!r} (expected e, -e, v or -v)")
        if op in (UpdateOp.INSERT_EDGE, UpdateOp.DELETE_EDGE):
            lines.arity(t, no, 3, 4, f"'{t[0]} <u> <v> [<label>]'")
            src.append(lines.vid(t[1], no))
            dst.append(lines.vid(t[2], no))
            labels.append(lines.label(t[3], no) if len(t) == 4 else 0)
        elif op == UpdateOp.INSERT_VERTEX:
            lines.arity(t, no, 3, 3, "'v <id> <label>'")
            src.append(lines.vid(t[1], no))
            dst.append(-1)
            labels.append(lines.label(t[2], no))
        else:
            lines.arity(t, no, 2, 3, "'-v <id>'")
            src.append(lines.vid(t[1], no))
            dst.append(-1)
            labels.append(0)
        ops.append(int(op))
    n = len(ops)
    return UpdateBatch.build(np.arange(first_seq, first_seq + n), ops, src, dst, labels)


def read_query(path: str | Path) -> Query:
    lines = Lines(path)
    vertices: list[tuple[int, int | None]] = []
    edges: list[tuple[int, int, int | None]] = []
    for no, t in lines:
        if t[0] == "v":
            lines.arity(t, no, 3, 4, "a query vertex line 'v <id> <label|*>'")
            vertices.append((lines.vid(t[1], no), lines.label(t[2], no, wildcard=True)))
        elif t[0] == "e":
            lines.arity(t, no, 3, 4, "a query edge line 'e <u> <v> [<label|*>]'")
            lab = lines.label(t[3], no, wildcard=True) if len(t) == 4 else 0
            edges.append((lines.vid(t[1], no), lines.vid(t[2], no), lab))
        elif t[0] != "t":
            raise lines.error(no, f"unknown line type {t[0]!r} in a query (expected 'v' or 'e')")
    try:
        return Query.build(vertices, edges)
    except QueryError as exc:
        raise lines.error(None, f"invalid query: {exc}") from None  # type: ignore[arg-type]


def _lab(x: int | None) -> str:
    return "*" if x is None else str(x)


def write_graph(f: TextIO, g: GraphData) -> None:
    f.writelines(f"v {v} {lab}\n" for v, lab in zip(g.vertex_ids.tolist(),
                                                     g.vertex_labels.tolist(), strict=True))
    f.writelines(f"e {a} {b} {lab}\n" for a, b, lab in zip(g.src.tolist(), g.dst.tolist(),
                                                          g.label.tolist(), strict=True))


def write_stream(f: TextIO, batch: UpdateBatch) -> None:
    names = {int(op): k for k, op in _OPS.items()}
    for op, a, b, lab in zip(batch.op.tolist(), batch.src.tolist(), batch.dst.tolist(),
                             batch.label.tolist(), strict=True):
        if op in (UpdateOp.INSERT_EDGE, UpdateOp.DELETE_EDGE):
            f.write(f"{names[op]} {a} {b} {lab}\n")
        elif op == UpdateOp.INSERT_VERTEX:
            f.write(f"v {a} {lab}\n")
        else:
            f.write(f"-v {a}\n")


def write_query(f: TextIO, q: Query) -> None:
    for v, lab in enumerate(q.vertex_labels):
        f.write(f"v {v} {_lab(lab)}\n")
    for a, b, lab in q.edges:
        f.write(f"e {a} {b} {_lab(lab)}\n")
