"""Format readers: exact parses, round trips, and every bad-input case names file:line."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from gpu import Query, UpdateBatch, UpdateOp
from streams import FormatError, GenConfig, generate, read_graph, read_query, read_stream
from streams.formats import csm


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_csm_graph_stream_and_query(tmp_path: Path) -> None:
    g = read_graph(_write(tmp_path, "g", "t 3 2\nv 0 1\nv 1 2\nv 9 3\ne 0 1 0\ne 1 9 4\n"))
    assert g.vertex_ids.tolist() == [0, 1, 9] and g.vertex_labels.tolist() == [1, 2, 3]
    assert (g.src.tolist(), g.dst.tolist(), g.label.tolist()) == ([0, 1], [1, 9], [0, 4])
    s = read_stream(_write(tmp_path, "s", "e 1 2 0\n-e 1 2 0\nv 7 5\n-v 7\ne 3 4\n"))
    assert s.op.tolist() == [0, 1, 2, 3, 0]
    assert s.seq.tolist() == [0, 1, 2, 3, 4]
    assert s.src.tolist() == [1, 1, 7, 7, 3] and s.label.tolist() == [0, 0, 5, 0, 0]
    q = read_query(_write(tmp_path, "q", "v 0 1\nv 1 *\ne 0 1 *\n"))
    assert q.vertex_labels == (1, None) and q.edges == ((0, 1, None),)


def test_snap_and_ar(tmp_path: Path) -> None:
    g = read_graph(_write(tmp_path, "s", "# c\n0\t1\n1\t0\n2 3\n"), "snap")
    assert g.src.tolist() == [0, 1, 2] and g.dst.tolist() == [1, 0, 3]
    g = read_graph(_write(tmp_path, "i", "UNDIRECTED\nNodes 4\n0 1\n"), "ar")
    assert g.src.tolist() == [0]
    s = read_stream(_write(tmp_path, "a", "A 0 2\nR 0 1\n"), "ar")
    assert s.op.tolist() == [UpdateOp.INSERT_EDGE, UpdateOp.DELETE_EDGE]


def test_round_trip_generated(tmp_path: Path) -> None:
    ds = generate(GenConfig(vertices=300, edges=900, queries=3, seed=3))
    for name, obj, writer, reader in (
            ("g", ds.initial, csm.write_graph, csm.read_graph),
            ("s", ds.stream, csm.write_stream, csm.read_stream)):
        buf = io.StringIO()
        writer(buf, obj)  # type: ignore[operator]
        back = reader(_write(tmp_path, name, buf.getvalue()))  # type: ignore[operator]
        for field in obj.__dataclass_fields__:  # type: ignore[union-attr]
            assert np.array_equal(getattr(obj, field), getattr(back, field)), field
    for i, (_, q) in enumerate(ds.queries):
        buf = io.StringIO()
        csm.write_query(buf, q)
        back = read_query(_write(tmp_path, f"q{i}", buf.getvalue()))
        assert (back.vertex_labels, back.edges) == (q.vertex_labels, q.edges)


def test_stream_batch_round_trip_vertex_ops(tmp_path: Path) -> None:
    b = UpdateBatch.build([0, 1, 2], [2, 3, 1], [5, 5, 1], [-1, -1, 2], [4, 0, 0])
    buf = io.StringIO()
    csm.write_stream(buf, b)
    assert buf.getvalue() == "v 5 4\n-v 5\n-e 1 2 0\n"


BAD = [
    ("graph", "csm", "v 0 1\nx 1 2\n", 2, "unknown line type 'x'"),
    ("graph", "csm", "v 0 1\ne 0\n", 2, "needs 3-4 fields"),
    ("graph", "csm", "v 0 a\n", 1, "label 'a' is not an integer"),
    ("graph", "csm", "v 0 1\nv 0 2\n", 2, "declared twice"),
    ("graph", "csm", "e 0 99999999999999999999 0\n", 1, "out of the 64-bit range"),
    ("graph", "csm", "e 0 x 0\n", 1, "vertex id 'x' is not an integer"),
    ("graph", "csm", "v 0 3000000000\n", 1, "out of the 32-bit range"),
    ("graph", "csm", "\n\n", None, "file is empty"),
    ("stream", "csm", "e 1 2 0\n+e 1 2\n", 2, "unknown operation '+e'"),
    ("stream", "csm", "e 1 2 1.5\n", 1, "label '1.5' is not an integer"),
    ("stream", "ar", "A 1 2\nX 1 2\n", 2, "unknown operation 'X'"),
    ("stream", "snap", "1 2 3\n", 1, "needs 2 fields"),
    ("query", "csm", "v 0 1\nv 1 1\nv 2 1\ne 0 1 0\n", None, "not connected"),
    ("query", "csm", "".join(f"v {i} 0\n" for i in range(13)) +
     "".join(f"e {i} {i + 1} 0\n" for i in range(12)), None, "2..12 vertices"),
    ("query", "csm", "v 0 1\nv 1 1\ne 0 2 0\n", None, "undeclared vertex 2"),
]


@pytest.mark.parametrize(("kind", "fmt", "text", "line", "message"), BAD)
def test_bad_input_names_file_and_line(tmp_path: Path, kind: str, fmt: str, text: str,
                                       line: int | None, message: str) -> None:
    p = _write(tmp_path, "bad.txt", text)
    read = {"graph": lambda: read_graph(p, fmt), "stream": lambda: read_stream(p, fmt),
            "query": lambda: read_query(p)}[kind]
    with pytest.raises(FormatError) as err:
        read()
    assert message in str(err.value)
    assert str(err.value).startswith(f"{p}:{line}:" if line else f"{p}")
    assert err.value.line == line


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="file not found"):
        read_graph(tmp_path / "nope")


def test_query_builder_rejects() -> None:
    from gpu import QueryError
    with pytest.raises(QueryError, match="self-loop"):
        Query.build([(0, 1), (1, 1)], [(0, 0, 0), (0, 1, 0)])
    with pytest.raises(QueryError, match="declared twice"):
        Query.build([(0, 1), (1, 1)], [(0, 1, 0), (1, 0, 0)])
