"""Runtime snapshots: the graph, the query set and the log position, in one file.

A snapshot at offset N holds the state after every update-log record below N was
applied and its deltas published and committed. Recovery restores the newest one and
replays the log from N only, so its time does not grow with the log; the log may then
be truncated below N (``DurableBroker.truncate`` does that for the embedded broker).

Files are ``snapshot-<N>.npz`` (uncompressed NumPy arrays plus a JSON header), written
to a temporary name, fsynced and renamed, so a crash leaves the old one or the new one,
never half of one. A file that does not read back is reported, never replaced.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .exceptions import StateCorrupt

__all__ = ["Snapshot", "check_latest", "read_latest", "write_snapshot"]

_NAME = re.compile(r"^snapshot-(\d{20})\.npz$")
_KEEP = 2
_FORMAT = 1


@dataclass(frozen=True, slots=True)
class Snapshot:
    #: the next update-log offset to apply
    offset: int
    #: registered queries: ``{"id", "seq", "doc"}`` (doc: the QueryDoc as JSON)
    queries: list[dict[str, Any]]
    #: last published delta per matches partition: ``[seq, sub, query]``
    published: dict[int, list[int]]
    graph: dict[str, npt.NDArray[Any]] = field(repr=False)


def _files(folder: Path) -> list[tuple[int, Path]]:
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), folder / m.group(0))
             for m in map(_NAME.match, os.listdir(folder)) if m]
    return sorted(found)


def write_snapshot(folder: Path, snap: Snapshot) -> Path:
    """Write durably, then drop all but the newest few (the folder is locked: no other
    writer's temporary file can be in it)."""
    folder.mkdir(parents=True, exist_ok=True)
    header = {"format": _FORMAT, "offset": snap.offset, "queries": snap.queries,
              "published": {str(k): v for k, v in snap.published.items()}}
    path = folder / f"snapshot-{snap.offset:020d}.npz"
    for torn in folder.glob(".snapshot-*.npz.tmp"):   # a write cut short by a crash
        with contextlib.suppress(FileNotFoundError):
            torn.unlink()
    tmp = folder / f".{path.name}.tmp"
    with tmp.open("wb") as f:
        arrays: dict[str, Any] = {f"g_{k}": v for k, v in snap.graph.items()}
        arrays["header"] = np.frombuffer(json.dumps(header).encode(), np.uint8)
        np.savez(f, **arrays)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    for _, old in _files(folder)[:-_KEEP]:
        with contextlib.suppress(FileNotFoundError):
            old.unlink()
    return path


def read_latest(folder: Path) -> Snapshot | None:
    """The newest snapshot, or None where there is none; :class:`StateCorrupt` where
    it does not read back whole (CRCs are checked as the arrays are read)."""
    files = _files(folder)
    if not files:
        return None
    offset, path = files[-1]
    try:
        with np.load(path, allow_pickle=False) as z:
            header = json.loads(z["header"].tobytes())
            graph = {k[2:]: z[k] for k in z.files if k.startswith("g_")}
        if header.get("format") != _FORMAT or header.get("offset") != offset:
            raise ValueError(f"header {header.get('format')!r}/{header.get('offset')!r}")
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
        raise StateCorrupt(f"snapshot {path} does not read back ({type(exc).__name__}: "
                           f"{exc}); move it aside to recover from the log alone; nothing "
                           "was changed") from None
    return Snapshot(offset=offset, queries=header["queries"],
                    published={int(k): v for k, v in header["published"].items()},
                    graph=graph)


def check_latest(folder: Path) -> None:
    """Refuse a damaged newest snapshot before the service starts (zip CRCs only)."""
    files = _files(folder)
    if not files:
        return
    path = files[-1][1]
    try:
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
    except (OSError, zipfile.BadZipFile) as exc:
        bad = f"{type(exc).__name__}: {exc}"
    if bad is not None:
        raise StateCorrupt(f"snapshot {path} is damaged ({bad}); move it aside to recover "
                           "from the log alone; nothing was changed")
