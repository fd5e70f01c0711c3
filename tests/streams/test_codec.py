"""The updates-log codec: both update forms decode to the same columns, control records
pass the fast path by, and every bad message gets a reason naming what is wrong."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gpu import UpdateOp
from streams.codec import LoadPart, Register, Unregister, Updates, decode, encode_updates
from streams.exceptions import DecodeError

DOCS = [{"op": "insert", "src": 1, "dst": 2, "label": 3}, {"op": "delete", "src": 2, "dst": 1},
        {"op": "insert_vertex", "id": 9, "label": 4}, {"op": "delete_vertex", "id": 9}]


def _enc(body: object) -> bytes:
    return json.dumps(body).encode()


def test_update_forms_decode_alike() -> None:
    rows = decode(_enc({"updates": DOCS, "arrived_at": 1.5}))
    assert isinstance(rows, Updates)
    assert rows.op.tolist() == [UpdateOp.INSERT_EDGE, UpdateOp.DELETE_EDGE,
                                UpdateOp.INSERT_VERTEX, UpdateOp.DELETE_VERTEX]
    assert rows.src.tolist() == [1, 2, 9, 9] and rows.dst.tolist() == [2, 1, -1, -1]
    assert rows.label.tolist() == [3, 0, 4, 0] and rows.arrived_at == 1.5
    cols = decode(encode_updates(rows))
    assert isinstance(cols, Updates) and cols.arrived_at == 1.5
    for name in ("op", "src", "dst", "label"):
        assert np.array_equal(getattr(cols, name), getattr(rows, name)), name


def test_control_records() -> None:
    q = {"vertices": [{"id": 0}, {"id": 1}], "edges": [{"src": 0, "dst": 1}]}
    assert isinstance(decode(_enc({"kind": "register", "query": q})), Register)
    assert decode(_enc({"kind": "unregister", "id": 4})) == Unregister(4)
    load = decode(_enc({"kind": "load", "load": "x", "part": 0, "parts": 1,
                        "columns": {"op": [0], "src": [1], "dst": [2], "label": [0]}}))
    assert isinstance(load, LoadPart) and load.edges.dst.tolist() == [2]


@pytest.mark.parametrize(("value", "reason"), [
    (b"", "empty message"),
    (b"{nope", "not JSON"),
    (b"[1]", "must be a JSON object"),
    (_enc({"updates": [{"op": "move", "src": 1, "dst": 2}]}), "updates.0"),
    (_enc({"updates": [{"op": "insert", "src": "1", "dst": 2}]}), "updates.0.insert.src"),
    (_enc({"updates": [{"op": "insert", "src": 1, "dst": 1}]}), "self-loop on vertex 1"),
    (_enc({"updates": DOCS, "columns": {"op": [], "src": [], "dst": [], "label": []}}),
     "exactly one of 'updates' and 'columns'"),
    (_enc({"columns": {"op": [0], "src": [1, 2], "dst": [2], "label": [0]}}),
     "columns.src: 2 values for 1 ops"),
    (_enc({"kind": "register", "query": {"vertices": []}}), "query.vertices"),
    (_enc({"updates": DOCS, "extra": 1}), "extra: Extra inputs are not permitted"),
])
def test_bad_messages_name_the_problem(value: bytes, reason: str) -> None:
    with pytest.raises(DecodeError, match=None) as info:
        decode(value)
    assert reason in str(info.value), str(info.value)
