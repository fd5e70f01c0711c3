"""The compiled matches-message formatter against json.loads, field by field."""

from __future__ import annotations

import json

import numpy as np

from streams._events import EventColumns, format_events

OPS = ["insert", "delete", "insert_vertex", "delete_vertex"]


def test_every_message_is_the_documented_json_with_its_seq_header() -> None:
    rng = np.random.default_rng(11)
    n = 300
    widths = [3, 5]
    listings = [rng.integers(-2**62, 2**62, (40, w)) for w in widths]
    flat = np.concatenate([t.reshape(-1) for t in listings])
    bases = [0, listings[0].size]
    listed = rng.random(n) < 0.5
    which = rng.integers(0, 2, n)
    first = rng.integers(0, 35, n)
    rows = np.where(listed, rng.integers(0, 6, n), 0)
    width = np.where(listed, np.array(widths)[which], 0)
    row0 = np.where(listed, np.array(bases)[which] + first * np.array(widths)[which], -1)
    count = rng.integers(1, 10**12, n) * rng.choice([-1, 1], n)
    arrived = 1.7e9 + rng.random(n) * 1e6
    ev = EventColumns(query=rng.integers(1, 10**6, n), seq=rng.integers(0, 2**60, n),
                      sub=rng.integers(0, 40, n), op=rng.integers(0, 4, n),
                      src=np.r_[-2**63, 2**63 - 1, rng.integers(-2**63, 2**63 - 1, n - 2)],
                      dst=np.where(rng.random(n) < 0.1, -1, rng.integers(0, 2**40, n)),
                      count=count, arrived_at=arrived, truncated=rng.random(n) < 0.3,
                      row0=row0, rows=rows, width=width, tuples=flat)
    published = float(arrived.max()) + 0.5
    values, off, headers, hoff = format_events(ev, published)
    assert len(off) == len(hoff) == n + 1
    for i in range(n):
        doc = json.loads(values[off[i]:off[i + 1]])
        assert list(doc) == ["query", "seq", "sub", "op", "src", "dst", "sign", "count",
                             "matches", "truncated", "arrived_at", "published_at"]
        if listed[i]:
            w = width[i]
            want = flat[row0[i]:row0[i] + rows[i] * w].reshape(-1, w).tolist()
        else:
            want = None
        assert doc == {
            "query": int(ev.query[i]), "seq": int(ev.seq[i]), "sub": int(ev.sub[i]),
            "op": OPS[ev.op[i]], "src": int(ev.src[i]), "dst": int(ev.dst[i]),
            "sign": 1 if count[i] > 0 else -1, "count": abs(int(count[i])), "matches": want,
            "truncated": bool(ev.truncated[i]), "arrived_at": doc["arrived_at"],
            "published_at": doc["published_at"]}
        assert abs(doc["arrived_at"] - arrived[i]) <= 1e-6
        assert abs(doc["published_at"] - published) <= 1e-6
        assert doc["arrived_at"] <= doc["published_at"]
        assert int(headers[hoff[i]:hoff[i + 1]]) == ev.seq[i]


def test_no_deltas_format_to_nothing() -> None:
    z = np.zeros(0, np.int64)
    ev = EventColumns(query=z, seq=z, sub=z, op=z, src=z, dst=z, count=z,
                      arrived_at=np.zeros(0), truncated=np.zeros(0, np.bool_), row0=z, rows=z,
                      width=z, tuples=z)
    assert format_events(ev, 1.0) == (b"", [0], b"", [0])
