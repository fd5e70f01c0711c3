"""The HTTP API: an app factory whose lifespan owns the broker, the engine and the runtime."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hmac
import json
import logging
import os
import socket
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np
from aiokafka import AIOKafkaProducer
from fastapi import Depends, FastAPI, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.routing import APIRoute
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from gpu import (
    CsmError,
    Engine,
    ExecutorOptions,
    LoadStats,
    QueryError,
    UnknownQueryError,
    warm_up,
)
from streams import OP_NAMES, read_graph
from streams.broker import EmbeddedBroker
from streams.codec import (
    SEQ_STRIDE,
    Control,
    LoadPart,
    Register,
    Unregister,
    Updates,
    encode_control,
    encode_updates,
    updates_from_docs,
    warm_up_codecs,
)
from streams.durable import DurableBroker
from streams.exceptions import DecodeError, FormatError, KafkaError
from streams.kafka import KafkaConfig, ensure_topics, kafka_errors, make_producer

from ._faults import crash_point
from .exceptions import BadRequest, GraphNotEmpty, NotOwner, NotReady, TooLarge, Unauthorized
from .metrics import Metrics
from .runtime import STATUS_NAMES, RegisteredDoc, Runtime, RuntimeConfig
from .schemas import (
    ErrorBody,
    GraphLoaded,
    GraphSize,
    MatchPage,
    QueryCreate,
    QueryPublic,
    UpdatesAccepted,
    UpdatesRequest,
)
from .settings import Settings, get_settings
from .snapshot import check_latest
from .state import StateDir, default_state_dir

__all__ = ["Services", "create_app"]

log = logging.getLogger("csm.service")
_LOAD_PART_EDGES = 200_000
_GRAPH_BODY = ("A graph file in the format the `format` parameter names: CSM lines "
               "`v <id> <label>` / `e <u> <v> [<label>]`, or SNAP lines `<u> <v>`. A file "
               "that does not parse (or declares a vertex twice) is refused with 422, naming "
               "the line.")
_WAIT_SECONDS = 600.0


@dataclass(slots=True)
class Services:
    """What the lifespan builds; routes reach it through ``ServicesDep``."""

    settings: Settings
    kafka: KafkaConfig
    metrics: Metrics
    runtime: Runtime
    producer: AIOKafkaProducer
    broker: EmbeddedBroker | DurableBroker | None

    async def append(self, value: bytes) -> int:
        """Append one record to the updates log (acks=all); return its offset."""
        crash_point("append")
        with kafka_errors("appending to the updates log"):
            md = await self.producer.send_and_wait(self.settings.topic_updates, value,
                                                   partition=0)
        ts = md.timestamp if md.timestamp is not None and md.timestamp > 0 else \
            int(time.time() * 1000)
        self.runtime.offer(int(md.offset), value, ts)   # no fetch wait for our own records
        return int(md.offset)

    async def control(self, c: Control) -> Any:
        """Append a control record and wait until the runtime has applied it."""
        off = await self.append(encode_control(c))
        try:
            out = await self.runtime.outcome(off, _WAIT_SECONDS)
        except TimeoutError:
            raise NotReady(f"the runtime has not reached log offset {off} yet") from None
        if isinstance(out, Exception):
            raise out
        return out


def _kafka_config(s: Settings, bootstrap: str) -> KafkaConfig:
    pw = s.kafka_sasl_password.get_secret_value() if s.kafka_sasl_password else None
    return KafkaConfig(bootstrap=bootstrap, security_protocol=s.kafka_security_protocol,
                       sasl_mechanism=s.kafka_sasl_mechanism,
                       sasl_username=s.kafka_sasl_username, sasl_password=pw,
                       ssl_cafile=s.kafka_ssl_cafile, ssl_certfile=s.kafka_ssl_certfile,
                       ssl_keyfile=s.kafka_ssl_keyfile,
                       fetch_max_wait_ms=s.kafka_fetch_max_wait_ms)


def open_state(s: Settings) -> StateDir | None:
    """The state directory this configuration uses, opened (locked, checked), or None:
    the durable default always has one; an external cluster only with CSM_STATE_DIR
    (snapshots); ``--ephemeral`` none."""
    if s.ephemeral or (s.kafka_bootstrap is not None and s.state_dir is None):
        return None
    st = StateDir(s.state_dir or default_state_dir())
    check_latest(st.snapshots / s.topic_updates)     # reads only: refused before the lock
    return st.open()


async def _start_broker(s: Settings, state: StateDir | None
                        ) -> EmbeddedBroker | DurableBroker | None:
    if s.kafka_bootstrap is not None:
        return None
    if s.ephemeral:
        log.warning("--ephemeral: the embedded broker keeps queries, graph and matches in "
                    "memory only; all of it is lost when the service stops")
        return await asyncio.to_thread(EmbeddedBroker().start)
    assert state is not None
    return await asyncio.to_thread(DurableBroker(state.broker).start)


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    s: Settings = app.state.settings
    state: StateDir | None = app.state.state_dir
    owned = state is None
    if owned:
        state = await asyncio.to_thread(open_state, s)
    broker = None
    try:
        broker = await _start_broker(s, state)
        bootstrap = s.kafka_bootstrap or broker.bootstrap  # type: ignore[union-attr]
        kafka = _kafka_config(s, bootstrap)
        topics = {s.topic_updates: 1, s.topic_queries: 1, s.topic_deadletter: 1,
                  s.topic_matches: s.matches_partitions}
        if s.instance_group is not None:
            topics[s.topic_shards] = s.matches_partitions
        found = await ensure_topics(kafka, topics)
        if s.instance_group is not None and found[s.topic_shards] != found[s.topic_matches]:
            raise KafkaError(f"topic {s.topic_shards} has {found[s.topic_shards]} partitions "
                             f"and {s.topic_matches} {found[s.topic_matches]}: a shard is "
                             "one matches partition, so they must be equal")
        if found.get(s.topic_updates) != 1:
            raise KafkaError(f"topic {s.topic_updates} must have exactly one partition")
        engine = Engine(s.backend, options=ExecutorOptions(
            graph_budget_bytes=s.gpu_graph_budget_bytes, cache=s.gpu_cache,
            device_graph=s.gpu_device_graph and s.instance_group is None,
            front_sms=s.gpu_front_sms))
        await asyncio.to_thread(warm_up, engine.backend, engine.options)
        await asyncio.to_thread(warm_up_codecs)
        gc.freeze()   # start-up objects leave the collector's scans: shorter gen-2 pauses
        metrics = Metrics(backend=engine.backend, ops=OP_NAMES.values(), statuses=STATUS_NAMES,
                          reasons=[r for _, code, r in _STATUS if code < 500] + ["invalid"])
        runtime = Runtime(engine, kafka, RuntimeConfig(
            updates_topic=s.topic_updates, matches_topic=s.topic_matches,
            queries_topic=s.topic_queries, deadletter_topic=s.topic_deadletter,
            group=s.kafka_consumer_group, max_poll_records=s.max_poll_records,
            matches_partitions=found[s.topic_matches],
            recent_per_query=s.recent_deltas_per_query,
            snapshot_dir=None if state is None else state.snapshots / s.topic_updates,
            snapshot_every=s.snapshot_every,
            snapshot_every_updates=s.snapshot_every_updates,
            instance_group=s.instance_group, instance_id=instance_id(s),
            advertised_url=s.advertised_url or f"http://{s.host}:{s.port}",
            assignment_topic=s.topic_shards, session_timeout_ms=s.group_session_timeout_ms,
            window_updates=s.catchup_window_updates,
            per_query_delivery=s.per_query_delivery), metrics,
            truncate=_truncator(s, broker))
        producer = make_producer(kafka)
        with kafka_errors("starting the API producer"):
            await producer.start()
        await runtime.start()
        app.state.services = Services(s, kafka, metrics, runtime, producer, broker)
        kind = ("external cluster" if broker is None else "in-memory embedded broker"
                if isinstance(broker, EmbeddedBroker) else "durable embedded broker, "
                f"state in {state.path}" if state is not None else "")
        log.info("kafka bootstrap %s (%s); backend %s; API http://%s:%d", bootstrap, kind,
                 engine.backend, s.host, s.port)
        try:
            yield
        finally:
            await runtime.stop()
            await producer.stop()
    finally:
        if broker is not None:
            await asyncio.to_thread(broker.stop)
        if owned and state is not None:
            state.close()


def instance_id(s: Settings) -> str:
    return s.instance_id or f"{socket.gethostname()}-{os.getpid()}"


def _truncator(s: Settings, broker: object) -> Any:
    """The durable embedded broker drops update-log batches behind each snapshot (not in
    an instance group: the others may still need the log behind this one's snapshot)."""
    if not isinstance(broker, DurableBroker) or s.instance_group is not None:
        return None
    return lambda offset: broker.truncate(s.topic_updates, 0, offset)


# -- dependencies ---------------------------------------------------------------------
def _services(request: Request) -> Services:
    svc: Services | None = getattr(request.app.state, "services", None)
    if svc is None:
        raise NotReady("the service is starting")
    return svc


ServicesDep = Annotated[Services, Depends(_services)]


def _auth(request: Request, svc: ServicesDep) -> None:
    token = svc.settings.api_token
    if token is None:
        return
    got = request.headers.get("authorization", "")
    want = f"Bearer {token.get_secret_value()}"
    if not hmac.compare_digest(got.encode(), want.encode()):
        raise Unauthorized("this endpoint needs 'Authorization: Bearer <CSM_API_TOKEN>'")


WriteAuth = Depends(_auth)


# -- errors: every domain error mapped to HTTP here, once ------------------------------------
_STATUS: list[tuple[type[Exception], int, str]] = [
    (Unauthorized, 401, "unauthorized"), (TooLarge, 413, "too_large"),
    (GraphNotEmpty, 409, "graph_not_empty"), (UnknownQueryError, 404, "unknown_query"),
    (QueryError, 422, "bad_query"), (DecodeError, 422, "bad_update"),
    (FormatError, 422, "bad_file"), (BadRequest, 422, "bad_request"),
    (NotReady, 503, "not_ready"), (KafkaError, 503, "kafka"),
]


def _install_errors(app: FastAPI) -> None:
    def reply(request: Request, code: int, reason: str, detail: str) -> JSONResponse:
        svc = getattr(request.app.state, "services", None)
        if svc is not None and code < 500:
            svc.metrics.rejected_requests.labels(reason).inc()
        return JSONResponse({"detail": detail}, status_code=code,
                            headers={"WWW-Authenticate": "Bearer"} if code == 401 else None)

    async def on_csm(request: Request, exc: Exception) -> JSONResponse:
        if isinstance(exc, NotOwner):   # scale-out: the query lives on another instance
            where = exc.url.rstrip("/") + request.url.path + (
                f"?{request.url.query}" if request.url.query else "")
            return JSONResponse({"detail": str(exc), "owner": exc.instance, "url": where},
                                status_code=307, headers={"Location": where})
        for cls, code, reason in _STATUS:
            if isinstance(exc, cls):
                return reply(request, code, reason, str(exc))
        return reply(request, 500, "internal", f"{type(exc).__name__}: {exc}")

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        errs = exc.errors() if isinstance(exc, RequestValidationError) else []
        parts = []
        for e in errs[:5]:
            loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
            parts.append(f"{loc}: {e.get('msg')}" if loc else str(e.get("msg")))
        more = len(errs) - 5
        return reply(request, 422, "invalid", "; ".join(parts) + (
            f" (and {more} more)" if more > 0 else ""))

    async def on_http(request: Request, exc: Exception) -> Response:
        """405 names every method the path has (Starlette names only the first route's);
        a body that is not even UTF-8 JSON is a 422 like any other invalid body."""
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 400:
            return reply(request, 422, "invalid", f"the request body cannot be parsed as "
                         f"JSON ({exc.detail})")
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(_allowed(request.app, request.scope))
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code,
                            headers=headers or None)

    app.add_exception_handler(CsmError, on_csm)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)


def _allowed(app: FastAPI, scope: Any) -> list[str]:
    methods: set[str] = set()
    for route in app.router.routes:
        if isinstance(route, APIRoute) and route.path_regex.match(scope["path"]):
            methods |= route.methods or set()
    return sorted(methods)


class _BodyLimit:
    """413 for bodies over the bound, counted as they stream in (no Content-Length trust)."""

    def __init__(self, app: Callable[..., Awaitable[None]], settings: Settings) -> None:
        self.app, self.settings = app, settings

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        graph = scope["path"] == "/v1/graph"
        limit = self.settings.max_graph_bytes if graph else self.settings.max_body_bytes
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            return await _too_large(send, limit)
        seen = 0

        async def limited() -> dict[str, Any]:
            nonlocal seen
            msg: dict[str, Any] = await receive()
            seen += len(msg.get("body", b""))
            if seen > limit:
                raise TooLarge(f"the request body is over {limit} bytes")
            return msg

        await self.app(scope, limited, send)


async def _too_large(send: Any, limit: int) -> None:
    body = json.dumps({"detail": f"the request body is over {limit} bytes"}).encode()
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


# -- the app ------------------------------------------------------------------------
def create_app(settings: Settings | None = None, state: StateDir | None = None) -> FastAPI:
    """``state``: a state directory the caller opened already (``csm serve`` opens it
    first, so a locked or damaged one exits 2 before anything starts)."""
    s = settings or get_settings()
    app = FastAPI(title="csm-service", version="0.1.0", lifespan=_lifespan,
                  description="Exact continuous subgraph matching as a stream.",
                  responses={422: {"model": ErrorBody}, 503: {"model": ErrorBody}})
    app.state.settings = s
    app.state.state_dir = state
    _install_errors(app)
    app.add_middleware(_BodyLimit, settings=s)  # type: ignore[arg-type]
    _routes(app)
    return app


def _public(rd: RegisteredDoc) -> QueryPublic:
    return QueryPublic(**rd.doc.model_dump(), id=rd.reg.id, seq=rd.seq,
                       automorphisms=rd.reg.automorphisms, plans=rd.reg.plan_count)


def _routes(app: FastAPI) -> None:  # noqa: C901 - one place that lists every route
    @app.post("/v1/updates", status_code=202, response_model=UpdatesAccepted,
              dependencies=[WriteAuth], responses={401: {"model": ErrorBody},
                                                   413: {"model": ErrorBody}})
    async def post_updates(body: UpdatesRequest, svc: ServicesDep) -> UpdatesAccepted:
        """Append a batch to the updates log; 202 once the broker holds it."""
        arrived = time.time()
        n = len(body.updates)
        if n > svc.settings.max_batch_updates:
            raise TooLarge(f"{n} updates in one request; the bound is "
                           f"{svc.settings.max_batch_updates} (CSM_MAX_BATCH_UPDATES)")
        u = updates_from_docs(body.updates, arrived)
        off = await svc.append(encode_updates(u))
        return UpdatesAccepted(first_seq=off * SEQ_STRIDE, last_seq=off * SEQ_STRIDE + n - 1,
                               count=n)

    @app.post("/v1/queries", status_code=201, response_model=QueryPublic,
              dependencies=[WriteAuth], responses={401: {"model": ErrorBody}})
    async def post_query(body: QueryCreate, svc: ServicesDep) -> QueryPublic:
        """Register a standing query; it matches every update after this point."""
        body.to_spec()    # refuse bad queries before anything reaches the log
        rd = await svc.control(Register(body))
        return _public(rd)

    @app.get("/v1/queries", response_model=list[QueryPublic])
    async def list_queries(svc: ServicesDep) -> list[QueryPublic]:
        return [_public(rd) for rd in svc.runtime.queries.values()]

    def _get(svc: Services, qid: int) -> RegisteredDoc:
        rd = svc.runtime.queries.get(qid)
        if rd is None:
            raise UnknownQueryError(f"no query with id {qid}")
        return rd

    @app.get("/v1/queries/{qid}", response_model=QueryPublic,
             responses={404: {"model": ErrorBody}, 307: {"model": ErrorBody}})
    async def get_query(qid: int, svc: ServicesDep) -> QueryPublic:
        """One query; on an instance that does not publish it, 307 to the one that does."""
        rd = _get(svc, qid)
        await svc.runtime.check_owner(qid)
        return _public(rd)

    @app.delete("/v1/queries/{qid}", status_code=204, dependencies=[WriteAuth],
                responses={404: {"model": ErrorBody}, 401: {"model": ErrorBody}})
    async def delete_query(qid: int, svc: ServicesDep) -> Response:
        _get(svc, qid)
        await svc.control(Unregister(qid))
        return Response(status_code=204)

    @app.get("/v1/matches", response_model=MatchPage,
             responses={404: {"model": ErrorBody}, 307: {"model": ErrorBody}})
    async def get_matches(svc: ServicesDep, query: Annotated[int, Query()],
                          after_seq: Annotated[int, Query()] = -1,
                          limit: Annotated[int, Query(ge=1, le=10_000)] = 1000) -> MatchPage:
        """Recent deltas of one query (bounded memory; the matches topic has them all).
        On an instance that does not publish it, 307 to the one that does."""
        _get(svc, query)
        await svc.runtime.check_owner(query)
        return MatchPage(query=query, events=svc.runtime.recent(query, after_seq, limit))

    @app.get("/v1/graph", response_model=GraphSize)
    async def get_graph(svc: ServicesDep) -> GraphSize:
        """Vertices and alive edges now, and the update-log offset they reflect."""
        g = svc.runtime.engine.graph
        return GraphSize(vertices=g.num_vertices, edges=g.num_edges,
                         offset=svc.runtime.next_offset)

    @app.post("/v1/graph", status_code=201, response_model=GraphLoaded,
              dependencies=[WriteAuth], responses={409: {"model": ErrorBody},
                                                   413: {"model": ErrorBody},
                                                   401: {"model": ErrorBody}},
              openapi_extra={"requestBody": {"required": True, "description": _GRAPH_BODY,
                                             "content": {"text/plain": {"schema": {
                                                 "type": "string", "minLength": 1}}}}})
    async def post_graph(request: Request, svc: ServicesDep,
                         format: Literal["csm", "snap"] = "csm") -> GraphLoaded:  # noqa: A002
        """Load the initial graph from a CSM or SNAP file (body); only while it is empty."""
        if svc.runtime.engine.graph.num_vertices:
            raise GraphNotEmpty("the graph is not empty: an initial graph can only be "
                                "loaded before any update")
        t0 = time.perf_counter()
        with tempfile.NamedTemporaryFile(prefix="csm-graph-", suffix=f".{format}") as f:
            async for part in request.stream():
                f.write(part)
            f.flush()
            try:
                g = await asyncio.to_thread(read_graph, f.name, format)
            except FormatError as exc:
                raise BadRequest(f"graph file, {exc.reason} (line {exc.line})") from None
        load = uuid.uuid4().hex
        n = max(1, -(-g.num_edges // _LOAD_PART_EDGES))
        offsets = []
        for i in range(n):
            sl = slice(i * _LOAD_PART_EDGES, (i + 1) * _LOAD_PART_EDGES)
            m = len(g.src[sl])
            first = i == 0
            part = LoadPart(load, i, n, g.vertex_ids if first else np.zeros(0, np.int64),
                            g.vertex_labels if first else np.zeros(0, np.int32),
                            Updates(np.zeros(m, np.int8), g.src[sl], g.dst[sl], g.label[sl]))
            offsets.append(await svc.append(encode_control(part)))
            log.info("graph upload %s: part %d of %d appended", load, i + 1, n)
        out = await svc.runtime.outcome(offsets[-1], _WAIT_SECONDS)
        if isinstance(out, Exception):
            raise out
        assert isinstance(out, LoadStats)
        return GraphLoaded(vertices=out.vertices, edges=out.edges, self_loops=out.self_loops,
                           duplicates=out.duplicates, seconds=time.perf_counter() - t0)

    @app.get("/healthz")
    async def healthz(request: Request) -> JSONResponse:
        svc = getattr(request.app.state, "services", None)
        bad = svc is not None and svc.runtime.failed is not None
        return JSONResponse({"status": "failed" if bad else "ok"},
                            status_code=503 if bad else 200)

    @app.get("/readyz")
    async def readyz(request: Request) -> JSONResponse:
        svc = getattr(request.app.state, "services", None)
        ok = svc is not None and svc.runtime.ready
        body: dict[str, Any] = {"ready": ok}
        if svc is not None:
            body.update(offset=svc.runtime.next_offset, backend=svc.runtime.engine.backend,
                        kafka_bootstrap=svc.kafka.bootstrap)
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.get("/metrics", response_class=PlainTextResponse, responses={200: {
        "description": "Prometheus text exposition format",
        "content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}}})
    async def metrics(svc: ServicesDep) -> Response:
        return Response(generate_latest(svc.metrics.registry), media_type=CONTENT_TYPE_LATEST)
