"""The object server over HTTP, as Tansu's object_store client uses it: conditional
writes, ETags, listings, ranges, and what it leaves on disk."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from streams.broker import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[httpx.Client, Path]]:
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "streams.objstore", "--root",
                          str(tmp_path / "objects"), "--port", str(port)], cwd=ROOT)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)
    try:
        while True:   # until it listens (a condition, not a fixed time)
            try:
                client.get("/b?list-type=2")
                break
            except httpx.TransportError:
                assert p.poll() is None, "the object server exited"
        yield client, tmp_path / "objects"
    finally:
        client.close()
        p.terminate()
        p.wait(10)


def _keys(c: httpx.Client, **params: str) -> list[str]:
    r = c.get("/b", params={"list-type": "2", **params})
    assert r.status_code == 200
    return re.findall(r"<(?:Key|Prefix)>([^<]*)</(?:Key|Prefix)>", r.text.split("</Prefix>", 1)[1])


def test_conditional_writes_honour_etags(store: tuple[httpx.Client, Path]) -> None:
    c, _ = store
    first = c.put("/b/w.json", content=b"1", headers={"If-None-Match": "*"})
    assert first.status_code == 200
    etag = first.headers["ETag"]
    assert c.put("/b/w.json", content=b"2", headers={"If-None-Match": "*"}).status_code == 412
    assert c.put("/b/w.json", content=b"2", headers={"If-Match": '"stale"'}).status_code == 412
    second = c.put("/b/w.json", content=b"2", headers={"If-Match": etag})
    assert second.status_code == 200 and second.headers["ETag"] != etag
    assert c.put("/b/w.json", content=b"3", headers={"If-Match": etag}).status_code == 412
    got = c.get("/b/w.json")
    assert got.content == b"2" and got.headers["ETag"] == second.headers["ETag"]
    assert c.get("/b/w.json", headers={"If-None-Match": got.headers["ETag"]}).status_code == 304
    assert c.put("/b/new", content=b"x", headers={"If-Match": "*"}).status_code == 412
    assert c.get("/b/missing").status_code == 404


def test_listing_ranges_and_odd_keys(store: tuple[httpx.Client, Path]) -> None:
    c, root = store
    keys = ["a", "a/b", "a/c/d", "a-z", "x~y/.hidden", "t/records/00000000000000000002.batch",
            "t/records/00000000000000000010.batch"]
    for k in keys:
        assert c.put(f"/b/{k}", content=k.encode()).status_code == 200
    assert _keys(c) == sorted(keys)
    assert _keys(c, prefix="a/") == ["a/b", "a/c/d"]
    assert _keys(c, prefix="a/", delimiter="/") == ["a/b", "a/c/"]
    after = {"start-after": "t/records/00000000000000000002.batch"}
    assert _keys(c, prefix="t/records/", **after) == ["t/records/00000000000000000010.batch"]
    assert c.get("/b/x~y/.hidden").content == b"x~y/.hidden"
    assert c.get("/b/a/c/d", headers={"Range": "bytes=2-"}).content == b"c/d"
    assert c.delete("/b/a/b").status_code == 204
    assert "a/b" not in _keys(c)
    assert not [p for p in root.rglob("*") if p.name.startswith(".tmp-")]
