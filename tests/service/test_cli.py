"""The csm command line, through click's runner: exact JSON, exit codes, messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from service.cli import main


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    g = tmp_path / "g.graph"
    g.write_text("v 1 0\nv 2 0\nv 3 0\nv 4 0\ne 1 2 0\ne 2 3 0\n")
    q = tmp_path / "tri.graph"
    q.write_text("v 0 0\nv 1 0\nv 2 0\ne 0 1 0\ne 1 2 0\ne 0 2 0\n")
    s = tmp_path / "s.graph"
    # closes a triangle, duplicate insert (ignored), self-loop (rejected), deletes it,
    # deletes a missing edge (ignored)
    s.write_text("e 1 3 0\ne 3 1 0\ne 4 4 0\n-e 1 2 0\n-e 1 4 0\n")
    return {"graph": g, "query": q, "stream": s}


def _run(files: dict[str, Path], *extra: str) -> object:
    return CliRunner().invoke(main, ["run", "--graph", str(files["graph"]), "--query",
                                     str(files["query"]), "--stream", str(files["stream"]),
                                     "--backend", "cpu", *extra])


@pytest.mark.parametrize(("mode", "count"), [("subgraphs", 1), ("embeddings", 6)])
def test_run_json_exact(files: dict[str, Path], mode: str, count: int) -> None:
    r = _run(files, "--json", "--count", mode)
    assert r.exit_code == 0, r.output  # type: ignore[attr-defined]
    out = json.loads(r.stdout)  # type: ignore[attr-defined]
    assert (out["updates"], out["ignored"], out["rejected"], out["applied"]) == (5, 2, 1, 2)
    assert (out["positive"], out["negative"]) == (count, count)
    assert out["backend"] == "cpu" and out["seconds"] >= 0
    assert out["updates_per_second"] > 0


def test_run_writes_deltas(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "d.jsonl"
    r = _run(files, "--deltas", str(out), "--list-matches")
    assert r.exit_code == 0, r.output  # type: ignore[attr-defined]
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(d["seq"], d["op"], d["sign"], d["count"]) for d in lines] == \
        [(0, "insert", 1, 1), (3, "delete", -1, 1)]
    assert sorted(lines[0]["matches"][0]) == [1, 2, 3]
    assert lines[0]["truncated"] is False


def test_run_summary_names_backend(files: dict[str, Path]) -> None:
    r = CliRunner().invoke(main, ["run", "--graph", str(files["graph"]), "--query",
                                  str(files["query"]), "--stream", str(files["stream"])])
    assert r.exit_code == 0
    assert "backend: cpu" in r.stdout  # auto picks cpu without a GPU here
    assert "+1 / -1" in r.stdout


def test_bad_stream_exits_2_with_file_and_line(files: dict[str, Path]) -> None:
    files["stream"].write_text("e 1 3 0\ne 1 x 0\n")
    r = _run(files, "--json")
    assert r.exit_code == 2
    assert r.stdout == ""  # type: ignore[attr-defined]
    assert f"{files['stream']}:2: vertex id 'x' is not an integer" in r.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in r.output  # type: ignore[attr-defined]


def test_empty_and_disconnected_query_exit_2(files: dict[str, Path]) -> None:
    files["query"].write_text("v 0 0\nv 1 0\nv 2 0\ne 0 1 0\n")
    r = _run(files)
    assert r.exit_code == 2 and "not connected" in r.stderr  # type: ignore[attr-defined]
    files["query"].write_text("")
    r = _run(files)
    assert r.exit_code == 2 and "file is empty" in r.stderr  # type: ignore[attr-defined]


def test_gpu_backend_unavailable_is_a_clear_error(files: dict[str, Path]) -> None:
    r = CliRunner().invoke(main, ["run", "--graph", str(files["graph"]), "--query",
                                  str(files["query"]), "--stream", str(files["stream"]),
                                  "--backend", "gpu"])
    assert r.exit_code == 2 and "backend 'gpu'" in r.stderr  # type: ignore[attr-defined]


def test_gen_then_run(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["gen", "--out", str(tmp_path / "d"), "--vertices", "400",
                                  "--edges", "1200", "--queries", "2", "--seed", "5"])
    assert r.exit_code == 0, r.output
    d = tmp_path / "d"
    r = CliRunner().invoke(main, ["run", "--graph", str(d / "initial_graph.graph"),
                                  "--query", str(d / "queries" / "query_0_sparse.graph"),
                                  "--stream", str(d / "stream.graph"), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["updates"] == 144  # type: ignore[attr-defined]


def test_demo_runs() -> None:
    r = CliRunner().invoke(main, ["demo", "--vertices", "500", "--edges", "1500", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)  # type: ignore[attr-defined]
    assert out["updates"] == 180 and len(out["queries"]) == 6
    assert out["deltas"] > 0 and out["positive"] + out["negative"] >= out["deltas"]
