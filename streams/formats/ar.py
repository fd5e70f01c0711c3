"""The add/remove streams of Stream-Networks (``*_initial.edges`` / ``*_stream.edges``).

Initial graph: optional ``UNDIRECTED`` and ``Nodes <n>`` header lines, then ``<u> <v>``.
Stream: ``A <u> <v>`` adds an edge, ``R <u> <v>`` removes one. Unlabelled (label 0).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpu import UpdateBatch, UpdateOp

from ._common import GraphData, Lines, graph_data

__all__ = ["read_graph", "read_stream"]


def read_graph(path: str | Path) -> GraphData:
    lines = Lines(path, comment="#")
    src, dst = [], []
    for no, t in lines:
        if t[0] in ("UNDIRECTED", "DIRECTED", "Nodes"):
            continue
        lines.arity(t, no, 2, 2, "an edge line '<u> <v>'")
        src.append(lines.vid(t[0], no))
        dst.append(lines.vid(t[1], no))
    return graph_data([], [], src, dst, [0] * len(src))


def read_stream(path: str | Path, first_seq: int = 0) -> UpdateBatch:
    lines = Lines(path, comment="#")
    ops, src, dst = [], [], []
    for no, t in lines:
        if t[0] not in ("A", "R"):
            raise lines.error(no, f"unknown operation {t[0]!r} (expected 'A' or 'R')")
        lines.arity(t, no, 3, 3, f"'{t[0]} <u> <v>'")
        ops.append(UpdateOp.INSERT_EDGE if t[0] == "A" else UpdateOp.DELETE_EDGE)
        src.append(lines.vid(t[1], no))
        dst.append(lines.vid(t[2], no))
    n = len(ops)
    return UpdateBatch.build(np.arange(first_seq, first_seq + n), ops, src, dst, np.zeros(n))
