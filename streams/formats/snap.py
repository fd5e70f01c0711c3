"""SNAP edge lists: ``# comment`` lines, then ``<u> <v>`` per line (tabs or spaces).

Unlabelled: every vertex and edge gets label 0. As a stream, each line inserts an edge.
Lists that store both directions load fine: the repeat is an ignored duplicate.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpu import UpdateBatch, UpdateOp

from ._common import GraphData, Lines, graph_data

__all__ = ["read_graph", "read_stream"]


def _edges(path: str | Path) -> tuple[list[int], list[int]]:
    lines = Lines(path, comment="#")
    src, dst = [], []
    for no, t in lines:
        lines.arity(t, no, 2, 2, "a SNAP edge line '<u> <v>'")
        src.append(lines.vid(t[0], no))
        dst.append(lines.vid(t[1], no))
    return src, dst


def read_graph(path: str | Path) -> GraphData:
    src, dst = _edges(path)
    return graph_data([], [], src, dst, [0] * len(src))


def read_stream(path: str | Path, first_seq: int = 0) -> UpdateBatch:
    src, dst = _edges(path)
    n = len(src)
    return UpdateBatch.build(np.arange(first_seq, first_seq + n),
                             np.full(n, UpdateOp.INSERT_EDGE), src, dst, np.zeros(n))
