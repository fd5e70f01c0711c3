"""Match deltas as JSON lines, one object per (update, query) with a non-empty delta."""

from __future__ import annotations

import json
from typing import Any, TextIO

from gpu import BatchResult, MatchDelta, UpdateOp

__all__ = ["OP_NAMES", "delta_to_dict", "write_deltas"]

OP_NAMES = {UpdateOp.INSERT_EDGE: "insert", UpdateOp.DELETE_EDGE: "delete",
            UpdateOp.INSERT_VERTEX: "insert_vertex", UpdateOp.DELETE_VERTEX: "delete_vertex"}


def delta_to_dict(d: MatchDelta) -> dict[str, Any]:
    out: dict[str, Any] = {"query": d.query, "seq": d.seq, "sub": d.sub,
                           "op": OP_NAMES[d.request_op], "src": d.src, "dst": d.dst,
                           "sign": d.sign, "count": d.count}
    if d.matches is not None:
        out["matches"] = d.matches.tolist()
        out["truncated"] = d.truncated
    return out


def write_deltas(f: TextIO, result: BatchResult) -> int:
    """Write every delta of ``result``; ``op`` is the operation the user sent."""
    n = 0
    for d in result.deltas():
        f.write(json.dumps(delta_to_dict(d), separators=(",", ":")))
        f.write("\n")
        n += 1
    return n
