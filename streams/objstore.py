"""A small S3-compatible object server over a directory: the embedded broker's disk.

Tansu's ``s3://`` storage engine is its only durable one, so the service runs this next
to it (``python -m streams.objstore --root DIR --port P``). It speaks exactly the calls
Tansu makes through the ``object_store`` crate, for one bucket per top-level folder:

- ``PUT /bucket/key`` (with ``If-None-Match: *`` or ``If-Match: <etag>``: 412 when the
  condition fails), ``GET`` (``Range`` honoured), ``HEAD``, ``DELETE``;
- ``GET /bucket?list-type=2`` (ListObjectsV2: ``prefix``, ``delimiter``,
  ``continuation-token``/``start-after``, ``max-keys``).

Durability: an object is written to a temporary file, fsynced, renamed over the old one
and its folder fsynced before the PUT is answered, so an acknowledged write survives a
kill -9 of any process and a power cut. ETags are ``size-mtime_ns-inode`` of the file
(every write renames a new inode in). Requests are not authenticated: it listens on
loopback only, for its own broker.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import email.utils
import hashlib
import logging
import os
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from xml.sax.saxutils import escape

__all__ = ["ObjectStore", "main", "serve"]

log = logging.getLogger("csm.objstore")
_SUFFIX = ".obj"        # objects are FILE.obj: key "a" and key "a/b" can both exist
_TMP = ".tmp-"
_XATTR = "user.csm.etag"
_SAFE = re.compile(r"^[A-Za-z0-9_.\-=+,@]+$")


def _quote(seg: str) -> str:
    """A key segment as a file name: anything unusual percent-encoded, never '.'/'..'."""
    if _SAFE.match(seg) and not seg.startswith(".") and not seg.endswith(_SUFFIX):
        return seg
    return "%" + urllib.parse.quote(seg, safe="").replace("%", "~")


def _unquote(name: str) -> str:
    if name.startswith("%"):
        return urllib.parse.unquote(name[1:].replace("~", "%"))
    return name


class ObjectStore:
    """Objects as files under ``root``; writes atomic and durable, conditions checked
    under one lock (compare and rename are one step)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._index_lock = threading.Lock()
        self._folders: dict[Path, _Folder] = {}

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
    def put(self, bucket: str, key: str, body: bytes, if_match: str | None,
            if_none_match: str | None) -> str | None:
        """Write ``body``; the new ETag, or None when the condition does not hold."""
        p = self.path(bucket, key)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.parent / f"{_TMP}{os.getpid()}-{threading.get_ident()}"
        etag = self.etag_of(body)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            with contextlib.suppress(OSError):
                os.setxattr(fd, _XATTR, etag.encode())
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        conditional = if_match is not None or if_none_match is not None
        with self._lock if conditional else contextlib.nullcontext():
            exists = p.exists()
            if (if_none_match == "*" and exists) or (
                    if_match is not None and (not exists or (
                        if_match != "*" and if_match != self.etag(p)))):
                tmp.unlink()
                return None
            os.replace(tmp, p)
        _fsync_dir(p.parent)
        self._noted(p, len(body), _iso(time.time_ns()))
        return etag

    def delete(self, bucket: str, key: str) -> None:
        p = self.path(bucket, key)
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
            _fsync_dir(p.parent)
        self._noted(p, None, "")

    def list(self, bucket: str, prefix: str, delimiter: str | None,
             after: str) -> Iterator[tuple[str, int | None, str]]:
        """(key, size, mtime_ns) of objects, (prefix, None, 0) of common prefixes, in
        key order. Folders are scanned once and then kept in memory (this process is
        their only writer), so a fetch's listing of a long partition stays cheap."""
        base = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        segs = base.split("/") if base else []
        yield from self._walk(self._dir(bucket, segs), base + "/" if base else "", prefix,
                              delimiter, after)

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


def _http_date(ns: int) -> str:
    return email.utils.formatdate(ns / 1e9, usegmt=True)


def _iso(ns: int) -> str:
    import datetime as dt
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    store: ObjectStore

    def setup(self) -> None:
        super().setup()   # no Nagle: a small answer is not held back 40 ms for an ACK
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        log.debug("%s " + format, self.address_string(), *args)

    # -- plumbing -------------------------------------------------------------------
    def _target(self) -> tuple[str, str, dict[str, str]]:
        u = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(u.path).lstrip("/")
        bucket, _, key = path.partition("/")
        q = dict(urllib.parse.parse_qsl(u.query, keep_blank_values=True))
        return bucket, key, q

    def _send(self, code: int, body: bytes = b"", headers: dict[str, str] | None = None,
              length: int | None = None) -> None:
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, code: int, s3code: str, msg: str) -> None:
        body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{s3code}</Code>'
                f"<Message>{escape(msg)}</Message></Error>").encode()
        self._send(code, body, {"Content-Type": "application/xml"})

    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(n) if n else b""
        if "aws-chunked" in (self.headers.get("Content-Encoding") or "") or \
                self.headers.get("x-amz-content-sha256", "").startswith("STREAMING-"):
            raise ValueError("aws-chunked uploads are not supported")
        return data

    # -- verbs ------------------------------------------------------------------------
    def do_PUT(self) -> None:  # noqa: N802
        bucket, key, q = self._target()
        body = self._body()
        if not key:   # CreateBucket
            self.store.root.joinpath(_quote(bucket)).mkdir(parents=True, exist_ok=True)
            return self._send(200)
        if "partNumber" in q or "x-amz-copy-source" in self.headers:
            return self._error(501, "NotImplemented", "multipart and copy are not supported")
        etag = self.store.put(bucket, key, body, self.headers.get("If-Match"),
                              self.headers.get("If-None-Match"))
        if etag is None:
            return self._error(412, "PreconditionFailed",
                               "At least one of the pre-conditions you specified did not hold")
        self._send(200, headers={"ETag": etag})

    def do_GET(self) -> None:  # noqa: N802
        bucket, key, q = self._target()
        if not key:
            return self._list(bucket, q)
        self._object(bucket, key, with_body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        bucket, key, _ = self._target()
        if not key:
            return self._send(200)
        self._object(bucket, key, with_body=False)

    def do_DELETE(self) -> None:  # noqa: N802
        bucket, key, _ = self._target()
        self.store.delete(bucket, key)
        self._send(204)

    def _object(self, bucket: str, key: str, *, with_body: bool) -> None:
        p = self.store.path(bucket, key)
        try:
            with p.open("rb") as f:
                st = os.fstat(f.fileno())
                data = f.read() if with_body else b""
                etag = self.store.etag(f.fileno(), data if with_body else None)
        except (FileNotFoundError, NotADirectoryError):
            return self._error(404, "NoSuchKey", f"no object {key}")
        headers = {"ETag": etag, "Last-Modified": _http_date(st.st_mtime_ns),
                   "Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"}
        inm, im = self.headers.get("If-None-Match"), self.headers.get("If-Match")
        if im is not None and im not in ("*", etag):
            return self._error(412, "PreconditionFailed", "If-Match does not hold")
        if inm is not None and inm in ("*", etag):
            return self._send(304, headers={"ETag": etag}, length=0)
        rng = self.headers.get("Range")
        if rng and with_body:
            m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
            if m is None:
                return self._error(416, "InvalidRange", rng)
            a, b = m.groups()
            size = len(data)
            if a == "":
                lo, hi = max(size - int(b), 0), size - 1
            else:
                lo, hi = int(a), min(int(b), size - 1) if b else size - 1
            if lo >= size or lo > hi:
                return self._error(416, "InvalidRange", rng)
            headers["Content-Range"] = f"bytes {lo}-{hi}/{size}"
            return self._send(206, data[lo:hi + 1], headers)
        self._send(200, data, headers, length=None if with_body else st.st_size)

    def _list(self, bucket: str, q: dict[str, str]) -> None:
        prefix = q.get("prefix", "")
        delim = q.get("delimiter") or None
        token = q.get("continuation-token") or ""
        after = max(token, q.get("start-after", ""))
        # all keys in one page unless max-keys asks otherwise: a partition's listing is
        # one round trip (object_store sends no max-keys)
        limit = int(q.get("max-keys") or 1 << 62)
        contents, prefixes, truncated, last = [], [], False, ""
        with self.store._index_lock:
            listing = list(self.store.list(bucket, prefix, delim, after))
        for key, size, mtime in listing:
            if len(contents) + len(prefixes) == limit:
                truncated = True
                break
            last = key
            if size is None:
                prefixes.append(f"<CommonPrefixes><Prefix>{escape(key)}</Prefix>"
                                "</CommonPrefixes>")
            else:
                contents.append(f"<Contents><Key>{escape(key)}</Key><LastModified>"
                                f"{mtime}</LastModified><Size>{size}</Size></Contents>")
        nxt = (f"<NextContinuationToken>{escape(last)}</NextContinuationToken>"
               if truncated else "")
        body = ('<?xml version="1.0" encoding="UTF-8"?>'
                '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                f"<Name>{escape(bucket)}</Name><Prefix>{escape(prefix)}</Prefix>"
                f"<KeyCount>{len(contents) + len(prefixes)}</KeyCount>"
                f"<MaxKeys>{min(limit, 1 << 31)}</MaxKeys>"
                f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>{nxt}"
                + "".join(contents) + "".join(prefixes) + "</ListBucketResult>").encode()
        self._send(200, body, {"Content-Type": "application/xml"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(root: Path, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """A bound server (not yet serving): ``serve(...).serve_forever()``."""
    root.mkdir(parents=True, exist_ok=True)
    handler = type("Handler", (_Handler,), {"store": ObjectStore(root)})
    return _Server((host, port), handler)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m streams.objstore", description=__doc__)
    ap.add_argument("--root", required=True, type=Path, help="directory holding the objects")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log-level", default="warning")
    a = ap.parse_args(argv)
    logging.basicConfig(level=a.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server = serve(a.root, a.host, a.port)
    log.info("serving %s on %s:%d", a.root, *server.server_address[:2])
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":  # pragma: no cover
    main()
