"""The updates-log codec: both update forms decode to the same columns, control records
pass the fast path by, and every bad message gets a reason naming what is wrong."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu import UpdateOp
from streams.codec import (
    LoadPart,
    Register,
    Unregister,
    Updates,
    _decode_full,
    decode,
    encode_updates,
)
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


# -- the compiled scanner of update messages against the schema -----------------------
_INTS = st.one_of(st.integers(-5, 1000), st.integers(-5, 1000), st.integers(-(2**63), 2**63 - 1),
                  st.sampled_from([2**31 - 1, 2**31, -(2**31), -(2**31) + 1, 2**63 - 1,
                                   -(2**63), -(2**63) + 1, 10**18 - 1, 10**18, -(10**18)]))
_ODD = st.sampled_from(["1.0", "1e3", '"1"', "true", "null", "01", "-0", "1.5", "[]"])
_OPS = st.sampled_from(['"insert"', '"delete"', '"insert_vertex"', '"delete_vertex"'])
_ODD_OPS = st.sampled_from(['"Insert"', '"ins\\u0065rt"', "1", '"x"'])
_WS = st.sampled_from(["", "", " ", "\n ", "\t"])


def _rarely(draw: st.DrawFn) -> bool:
    return draw(st.integers(0, 19)) == 0


@st.composite
def _update_text(draw: st.DrawFn) -> str:
    op = draw(_ODD_OPS) if _rarely(draw) else draw(_OPS)
    keys = {"insert": ["src", "dst", "label"], "delete": ["src", "dst", "label"],
            "insert_vertex": ["id", "label"], "delete_vertex": ["id"]}.get(op.strip('"'),
                                                                       ["src", "dst"])
    keys = [k for k in keys if k == "label" and draw(st.booleans()) or k != "label"
            and not _rarely(draw)]                                   # rarely a missing key
    if _rarely(draw):
        keys.append(draw(st.sampled_from(["src", "dst", "id", "label", "op", "x"])))
    parts = [("op", op)] + [(k, draw(_ODD) if _rarely(draw) else str(draw(_INTS)))
                            for k in keys]
    parts = draw(st.permutations(parts))
    w = draw(_WS)
    return "{" + w + ("," + w).join(f'"{k}"{w}:{w}{v}' for k, v in parts) + w + "}"


@st.composite
def _message(draw: st.DrawFn) -> bytes:
    w = draw(_WS)
    ups = draw(st.lists(_update_text(), min_size=0 if _rarely(draw) else 1, max_size=4))
    fields = [("updates", "[" + w + ("," + w).join(ups) + w + "]")]
    at = draw(st.sampled_from([None, "null", "1.5", "1700000000", "-2.5e-3", "0.1"]))
    if _rarely(draw):
        at = draw(st.sampled_from(["1e999", '"x"', "1.", ".5", "-", "1e"]))
    if at is not None:
        fields.append(("arrived_at", at))
    if _rarely(draw):
        fields.append(draw(st.sampled_from([("columns", "null"), ("kind", '"x"'),
                                            ("updates", "[]")])))
    fields = draw(st.permutations(fields))
    return ("{" + w + ("," + w).join(f'"{k}"{w}:{w}{v}' for k, v in fields) + w + "}"
            + draw(_WS)).encode()


def _outcome(f: object, msg: bytes) -> object:
    try:
        u = f(msg)  # type: ignore[operator]
    except DecodeError as exc:
        return ("error", str(exc))
    assert isinstance(u, Updates)
    return (u.op.tolist(), u.op.dtype, u.src.tolist(), u.src.dtype, u.dst.tolist(),
            u.dst.dtype, u.label.tolist(), u.label.dtype, u.arrived_at)


@settings(max_examples=600, deadline=None, derandomize=True)
@given(_message())
def test_scanner_equals_the_schema_on_any_update_message(msg: bytes) -> None:
    """The fast path accepts only what the schema accepts, with the same columns; everything
    else falls through to the schema, so errors read the same either way."""
    assert _outcome(decode, msg) == _outcome(_decode_full, msg)


def test_scanner_takes_the_messages_producers_write() -> None:
    from streams._scan import scan_updates

    msg = _enc({"updates": DOCS * 50, "arrived_at": 1.25})
    assert scan_updates(msg, 10**6) is not None
    assert scan_updates(json.dumps({"updates": DOCS}, indent=2).encode(), 10**6) is not None
    assert _outcome(decode, msg) == _outcome(_decode_full, msg)
