"""A small S3-compatible object server over a directory: the embedded broker's disk.

Tansu's ``s3://`` storage engine is its only durable one, so the service runs this next
to it (``python -m streams.objstore --root DIR --port P``; the HTTP side is
``streams._s3http``). It speaks exactly the calls Tansu makes through the
``object_store`` crate, one bucket per top-level folder:

- ``PUT /bucket/key`` (with ``If-None-Match: *`` or ``If-Match: <etag>``: 412 when the
  condition fails), ``GET`` (``Range``, ``If-None-Match`` -> 304), ``HEAD``, ``DELETE``;
- ``GET /bucket?list-type=2`` (ListObjectsV2: ``prefix``, ``delimiter``,
  ``continuation-token``/``start-after``, ``max-keys``; all keys in one page by default).

Durability: an object is written to a temporary file, fdatasynced, renamed over the old
one and its folder fsynced before the PUT is answered, so an acknowledged write survives
a kill -9 of any process and a power cut (``--unsynced`` names keys that skip the syncs
but keep the atomic rename). ETags are the content's MD5, kept in an extended attribute
(recomputed where the file system has none). This process is the folder's only writer,
so it keeps each listed folder's sorted entries in memory. Requests are not
authenticated: it listens on loopback only, for its own broker.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import hashlib
import logging
import os
import re
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

__all__ = ["ObjectStore", "main"]

log = logging.getLogger("csm.objstore")
_SUFFIX = ".obj"        # objects are FILE.obj: key "a" and key "a/b" can both exist
_TMP = ".tmp-"
_XATTR = "user.csm.etag"
_SAFE = re.compile(r"^[A-Za-z0-9_.\-=+,@]+$")


def _quote(seg: str) -> str:
    """A key segment as a file name: anything unusual percent-encoded, never '.'/'..'."""
    if _SAFE.match(seg) and not seg.startswith(".") and not seg.endswith(_SUFFIX):
        return seg
    return "%" + urllib.parse.quote(seg, safe="").replace("~", "%7E").replace("%", "~")


def _unquote(name: str) -> str:
    if name.startswith("%"):
        return urllib.parse.unquote(name[1:].replace("~", "%"))
    return name


class ObjectStore:
    """Objects as files under ``root``; writes atomic and durable, conditions checked
    under one lock (compare and rename are one step)."""

    def __init__(self, root: Path, unsynced: str | None = None) -> None:
        """``unsynced``: a regex of keys written atomically but not fsynced (state whose
        loss in a power cut is harmless: Tansu's consumer-group records, where an older
        committed offset only means a longer replay that publishes nothing twice)."""
        self.root = root
        self._unsynced = re.compile(unsynced) if unsynced else None
        self._lock = threading.Lock()
        self._index_lock = threading.Lock()
        self._folders: dict[Path, _Folder] = {}
        self._made: set[Path] = set()

    # -- paths -----------------------------------------------------------------------
    def _dir(self, bucket: str, segs: list[str]) -> Path:
        return self.root.joinpath(_quote(bucket), *(_quote(s) for s in segs))

    def path(self, bucket: str, key: str) -> Path:
        *dirs, name = key.split("/")
        return self._dir(bucket, dirs) / (_quote(name) + _SUFFIX)

    @staticmethod
    def etag_of(data: bytes | memoryview) -> str:
        return '"' + hashlib.md5(data, usedforsecurity=False).hexdigest() + '"'

    def etag(self, p: Path | int, data: bytes | None = None) -> str:
        """The object's MD5 (as S3's for a single PUT), kept in an extended attribute;
        read back from the content where the file system has none."""
        try:
            return os.getxattr(p, _XATTR).decode()
        except OSError:
            if data is None:
                data = Path(p).read_bytes() if isinstance(p, Path) else os.pread(
                    p, os.fstat(p).st_size, 0)
            return self.etag_of(data)

    # -- operations ----------------------------------------------------------------
    def synced(self, key: str) -> bool:
        return self._unsynced is None or not self._unsynced.match(key)

    def put(self, bucket: str, key: str, body: bytes, if_match: str | None,
            if_none_match: str | None) -> str | None:
        """Write ``body``; the new ETag, or None when the condition does not hold."""
        p = self.path(bucket, key)
        sync = self.synced(key)
        if p.parent not in self._made:
            p.parent.mkdir(parents=True, exist_ok=True)
            self._made.add(p.parent)
        tmp = p.parent / f"{_TMP}{os.getpid()}-{threading.get_ident()}"
        etag = self.etag_of(body)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            with contextlib.suppress(OSError):
                os.setxattr(fd, _XATTR, etag.encode())
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view):]
            if sync:
                os.fdatasync(fd)
        finally:
            os.close(fd)
        conditional = if_match is not None or if_none_match is not None
        with self._lock if conditional else contextlib.nullcontext():
            exists = os.path.exists(p)
            if (if_none_match == "*" and exists) or (
                    if_match is not None and (not exists or (
                        if_match != "*" and if_match != self.etag(p)))):
                tmp.unlink()
                return None
            os.replace(tmp, p)
        if sync:
            _fsync_dir(p.parent)
        self._noted(p, len(body), _iso(time.time_ns()))
        return etag

    def delete(self, bucket: str, key: str) -> None:
        p = self.path(bucket, key)
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
            _fsync_dir(p.parent)
        self._noted(p, None, "")

    def get(self, bucket: str, key: str, *, with_body: bool
            ) -> tuple[bytes, int, int, str] | None:
        """(content or b"", size, mtime_ns, etag), or None where there is no object."""
        try:
            fd = os.open(self.path(bucket, key), os.O_RDONLY)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            st = os.fstat(fd)
            data = os.pread(fd, st.st_size, 0) if with_body else b""
            return data, st.st_size, st.st_mtime_ns, self.etag(fd, data if with_body else None)
        finally:
            os.close(fd)

    def list(self, bucket: str, prefix: str, delimiter: str | None,
             after: str) -> list[tuple[str, int | None, str]]:
        """(key, size, ISO mtime) of objects, (prefix, None, "") of common prefixes, in
        key order. Folders are scanned once and then kept in memory (this process is
        their only writer), so a fetch's listing of a long partition stays cheap."""
        base = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        segs = base.split("/") if base else []
        with self._index_lock:
            return list(self._walk(self._dir(bucket, segs), base + "/" if base else "",
                                   prefix, delimiter, after))

    def _entries(self, d: Path) -> _Folder:
        f = self._folders.get(d)
        if f is None:
            f = _Folder()
            try:
                for e in os.scandir(d):
                    if e.is_dir():
                        f.add(_unquote(e.name) + "/", None, "")
                    elif e.name.endswith(_SUFFIX):
                        st = e.stat()
                        f.add(_unquote(e.name[:-len(_SUFFIX)]), st.st_size, _iso(st.st_mtime_ns))
            except (FileNotFoundError, NotADirectoryError):
                return f
            self._folders[d] = f
        return f

    def _walk(self, d: Path, kp: str, prefix: str, delimiter: str | None,
              after: str) -> Iterator[tuple[str, int | None, str]]:
        f = self._entries(d)
        first = after[len(kp):].split("/")[0] if after.startswith(kp) else ""
        for name in f.names[bisect.bisect_left(f.names, first):]:
            key = kp + name
            size, mtime = f.meta.get(name, (None, ""))
            if size is None:   # a folder
                if not (key.startswith(prefix) or prefix.startswith(key)):
                    continue
                if delimiter == "/" and key.startswith(prefix) and len(key) > len(prefix):
                    if key > after:
                        yield key, None, ""
                    continue
                yield from self._walk(d / _quote(name[:-1]), key, prefix, delimiter, after)
            elif key.startswith(prefix) and key > after:
                yield key, size, mtime

    def _noted(self, p: Path, size: int | None, mtime: str) -> None:
        """Keep the cached folders in step with a write (size None: a removal)."""
        name = _unquote(p.name[:-len(_SUFFIX)])
        d = p.parent
        with self._index_lock:
            f = self._folders.get(d)
            if f is not None:
                if size is None:
                    f.remove(name)
                else:
                    f.add(name, size, mtime)
            while d != self.root and size is not None:   # new folders up the tree
                parent = self._folders.get(d.parent)
                if parent is not None:
                    parent.add(_unquote(d.name) + "/", None, "")
                d = d.parent


class _Folder:
    """One folder's entries: sorted names ('x/' for sub-folders) and (size, mtime)."""

    __slots__ = ("meta", "names")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.meta: dict[str, tuple[int | None, str]] = {}

    def add(self, name: str, size: int | None, mtime: str) -> None:
        if name not in self.meta:
            if not self.names or name > self.names[-1]:
                self.names.append(name)   # the usual case: increasing batch offsets
            else:
                bisect.insort(self.names, name)
        self.meta[name] = (size, mtime)

    def remove(self, name: str) -> None:
        if self.meta.pop(name, None) is not None or name in self.names:
            i = bisect.bisect_left(self.names, name)
            if i < len(self.names) and self.names[i] == name:
                del self.names[i]


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _iso(ns: int) -> str:
    import datetime as dt
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m streams.objstore", description=__doc__)
    ap.add_argument("--root", required=True, type=Path, help="directory holding the objects")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log-level", default="warning")
    ap.add_argument("--unsynced", help="regex of keys not fsynced (see ObjectStore)")
    a = ap.parse_args(argv)
    logging.basicConfig(level=a.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from ._s3http import run
    a.root.mkdir(parents=True, exist_ok=True)
    # the loop must get the GIL back quickly from a PUT's worker thread: with the default
    # 5 ms switch interval a fetch's listing waited behind it (PUT p99 14 ms under load)
    sys.setswitchinterval(0.0002)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run(ObjectStore(a.root, a.unsynced), a.host, a.port))


if __name__ == "__main__":  # pragma: no cover
    main()
