"""The object server's HTTP side: the S3 calls Tansu makes, on one asyncio loop.

A minimal HTTP/1.1 parser (request line, headers, ``Content-Length`` body, keep-alive)
instead of ``http.server``: every produce costs two PUTs and every fetch a listing and a
GET, so per-request overhead is broker latency (0.49 ms a PUT through ``http.server``,
without fsync, on the 2-core build machine). Requests are handled in arrival order on
the loop; the fsyncs of a PUT run on a worker thread so a fetch is not held behind them.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import re
import socket
import time
import urllib.parse
from xml.sax.saxutils import escape

from .objstore import ObjectStore

__all__ = ["run"]

log = logging.getLogger("csm.objstore")
_REASON = {200: "OK", 204: "No Content", 206: "Partial Content", 304: "Not Modified",
           400: "Bad Request", 404: "Not Found", 412: "Precondition Failed",
           416: "Range Not Satisfiable", 501: "Not Implemented"}
_MAX_HEAD = 64 << 10


def _http_date(ns: int) -> str:
    return email.utils.formatdate(ns / 1e9, usegmt=True)


def _response(code: int, body: bytes = b"", headers: dict[str, str] | None = None,
              length: int | None = None, head: bool = False) -> bytes:
    lines = [f"HTTP/1.1 {code} {_REASON.get(code, 'Error')}"]
    for k, v in (headers or {}).items():
        lines.append(f"{k}: {v}")
    lines.append(f"Content-Length: {len(body) if length is None else length}")
    out = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return out if head else out + body


def _error(code: int, s3code: str, msg: str) -> bytes:
    body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{s3code}</Code>'
            f"<Message>{escape(msg)}</Message></Error>").encode()
    return _response(code, body, {"Content-Type": "application/xml"})


class _Request:
    __slots__ = ("body", "bucket", "headers", "key", "method", "query")

    def __init__(self, method: str, target: str, headers: dict[str, str], body: bytes) -> None:
        u = urllib.parse.urlsplit(target)
        path = urllib.parse.unquote(u.path).lstrip("/")
        self.bucket, _, self.key = path.partition("/")
        self.query = dict(urllib.parse.parse_qsl(u.query, keep_blank_values=True))
        self.method, self.headers, self.body = method, headers, body


class _Conn(asyncio.Protocol):
    def __init__(self, server: _Server) -> None:
        self.server = server
        self.buf = bytearray()
        self.queue: asyncio.Queue[_Request | None] = asyncio.Queue()
        self.transport: asyncio.Transport | None = None
        self.task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:   # no Nagle: a small answer is not held back for an ACK
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.task = asyncio.ensure_future(self._serve())

    def connection_lost(self, exc: Exception | None) -> None:
        self.queue.put_nowait(None)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > _MAX_HEAD:
                    self._close()
                return
            head = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
            headers = {}
            for line in head[1:]:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
            n = int(headers.get("content-length") or 0)
            if len(self.buf) < end + 4 + n:
                return
            body = bytes(self.buf[end + 4:end + 4 + n])
            del self.buf[:end + 4 + n]
            try:
                method, target, _ = head[0].split(" ", 2)
            except ValueError:
                self._close()
                return
            self.queue.put_nowait(_Request(method, target, headers, body))

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    async def _serve(self) -> None:
        """One request at a time per connection, answers in order."""
        while (req := await self.queue.get()) is not None:
            t0 = time.perf_counter()
            try:
                out = await self.server.handle(req)
            except Exception as exc:  # noqa: BLE001 - answer, log, keep serving
                log.exception("%s %s/%s failed", req.method, req.bucket, req.key)
                out = _error(500, "InternalError", f"{type(exc).__name__}: {exc}")
            if self.transport is None or self.transport.is_closing():
                return
            self.transport.write(out)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%.2f ms %s /%s/%s %s", (time.perf_counter() - t0) * 1e3, req.method,
                          req.bucket, req.key, out[9:12].decode())


class _Server:
    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    async def handle(self, r: _Request) -> bytes:
        if r.method == "PUT":
            return await self._put(r)
        if r.method in ("GET", "HEAD"):
            if not r.key:
                return self._list(r) if r.method == "GET" else _response(200, head=True)
            return self._object(r, head=r.method == "HEAD")
        if r.method == "DELETE":
            self.store.delete(r.bucket, r.key)
            return _response(204)
        return _error(501, "NotImplemented", f"{r.method} is not supported")

    async def _put(self, r: _Request) -> bytes:
        if not r.key:   # CreateBucket
            self.store.root.joinpath(r.bucket).mkdir(parents=True, exist_ok=True)
            return _response(200)
        if "partNumber" in r.query or "x-amz-copy-source" in r.headers:
            return _error(501, "NotImplemented", "multipart and copy are not supported")
        if "aws-chunked" in r.headers.get("content-encoding", "") or \
                r.headers.get("x-amz-content-sha256", "").startswith("STREAMING-"):
            return _error(501, "NotImplemented", "aws-chunked uploads are not supported")
        args = (r.bucket, r.key, r.body, r.headers.get("if-match"),
                r.headers.get("if-none-match"))
        # only the fsyncs are worth a worker thread; an unsynced write is quicker inline
        etag = (await asyncio.to_thread(self.store.put, *args) if self.store.synced(r.key)
                else self.store.put(*args))
        if etag is None:
            return _error(412, "PreconditionFailed",
                          "At least one of the pre-conditions you specified did not hold")
        return _response(200, headers={"ETag": etag})

    def _object(self, r: _Request, *, head: bool) -> bytes:
        got = self.store.get(r.bucket, r.key, with_body=not head)
        if got is None:
            return _error(404, "NoSuchKey", f"no object {r.key}")
        data, size, mtime_ns, etag = got
        headers = {"ETag": etag, "Last-Modified": _http_date(mtime_ns),
                   "Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"}
        im, inm = r.headers.get("if-match"), r.headers.get("if-none-match")
        if im is not None and im not in ("*", etag):
            return _error(412, "PreconditionFailed", "If-Match does not hold")
        if inm is not None and inm in ("*", etag):
            return _response(304, headers={"ETag": etag}, length=0)
        rng = r.headers.get("range")
        if rng and not head:
            m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
            if m is None:
                return _error(416, "InvalidRange", rng)
            a, b = m.groups()
            if a == "":
                lo, hi = max(size - int(b), 0), size - 1
            else:
                lo, hi = int(a), min(int(b), size - 1) if b else size - 1
            if lo >= size or lo > hi:
                return _error(416, "InvalidRange", rng)
            headers["Content-Range"] = f"bytes {lo}-{hi}/{size}"
            return _response(206, data[lo:hi + 1], headers)
        return _response(200, data, headers, length=size, head=head)

    def _list(self, r: _Request) -> bytes:
        q = r.query
        prefix = q.get("prefix", "")
        delim = q.get("delimiter") or None
        after = max(q.get("continuation-token") or "", q.get("start-after", ""))
        # all keys in one page unless max-keys asks otherwise: a partition's listing is
        # one round trip (object_store sends no max-keys)
        limit = int(q.get("max-keys") or 1 << 62)
        contents: list[str] = []
        prefixes: list[str] = []
        truncated, last = False, ""
        for key, size, mtime in self.store.list(r.bucket, prefix, delim, after):
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
                f"<Name>{escape(r.bucket)}</Name><Prefix>{escape(prefix)}</Prefix>"
                f"<KeyCount>{len(contents) + len(prefixes)}</KeyCount>"
                f"<MaxKeys>{min(limit, 1 << 31)}</MaxKeys>"
                f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>{nxt}"
                + "".join(contents) + "".join(prefixes) + "</ListBucketResult>").encode()
        return _response(200, body, {"Content-Type": "application/xml"})


async def run(store: ObjectStore, host: str, port: int) -> None:
    """Serve ``store`` until cancelled."""
    srv = _Server(store)
    server = await asyncio.get_running_loop().create_server(lambda: _Conn(srv), host, port)
    log.info("serving %s on %s:%d", store.root, host, port)
    async with server:
        await server.serve_forever()
