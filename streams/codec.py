"""The updates log's message schema: what REST appends and what any producer may write.

Every message on the updates topic is one JSON object. Kinds:

- ``{"updates": [{"op": "insert", "src": 1, "dst": 2, "label": 0}, ...]}``: the REST
  body, accepted from any producer as is;
- ``{"columns": {"op": [0, 1], "src": [...], "dst": [...], "label": [...]}}``: the same,
  column-wise (op codes 0 insert, 1 delete, 2 insert_vertex, 3 delete_vertex; a vertex
  op puts the vertex id in ``src``), the fast path for bulk producers;
- ``{"kind": "register", "query": {...}}``, ``{"kind": "unregister", "id": N}`` and
  ``{"kind": "load", "load": "...", "part": i, "parts": n, "columns": {...}}``: control
  records written by the service, ordered with the updates so a replay is exact.

An update's sequence number is ``offset * SEQ_STRIDE + position`` within its message,
so the log alone fixes it, whoever produced the message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired

import numpy as np
import numpy.typing as npt
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    TypeAdapter,
    WithJsonSchema,
    with_config,
)
from pydantic import ValidationError as _ValidationError
from typing_extensions import TypedDict

from gpu import MAX_QUERY_VERTICES, CountMode, Query, QuerySpec, UpdateOp

from ._events import EventColumns, format_events, warm_up_formatter
from ._scan import scan_updates
from .exceptions import DecodeError

__all__ = [
    "MAX_UPDATES_PER_MESSAGE",
    "SEQ_STRIDE",
    "Columns",
    "Control",
    "EventColumns",
    "LoadPart",
    "QueryDoc",
    "Register",
    "Unregister",
    "UpdateDoc",
    "Updates",
    "decode",
    "doc_from_query",
    "docs_from_batch",
    "encode_control",
    "encode_updates",
    "error_text",
    "format_events",
    "updates_from_docs",
    "warm_up_codecs",
]

SEQ_STRIDE = 1_000_000
MAX_UPDATES_PER_MESSAGE = SEQ_STRIDE
_I64, _I32 = np.iinfo(np.int64), np.iinfo(np.int32)

#: the JSON schema states the bounds as exact integers (pydantic would write floats, and
#: 9.223372036854776e+18 admits ids the validation refuses)
VertexId = Annotated[StrictInt, Field(ge=int(_I64.min) + 1, le=int(_I64.max)),
                     WithJsonSchema({"type": "integer", "minimum": int(_I64.min) + 1,
                                     "maximum": int(_I64.max)})]
#: data labels: any 32-bit int but the wildcard sentinel (int32 min)
Label = Annotated[StrictInt, Field(gt=int(_I32.min), le=int(_I32.max)),
                  WithJsonSchema({"type": "integer", "minimum": int(_I32.min) + 1,
                                  "maximum": int(_I32.max)})]
_FROZEN = ConfigDict(extra="forbid", frozen=True)


# Updates are TypedDicts, not models: validated in Rust with no object per update (3x
# faster than BaseModel on 1,000-update messages), and still a precise JSON schema.
@with_config(_FROZEN)
class EdgeInsert(TypedDict):
    op: Literal["insert"]
    src: VertexId
    dst: VertexId
    label: NotRequired[Label]


@with_config(_FROZEN)
class EdgeDelete(TypedDict):
    op: Literal["delete"]
    src: VertexId
    dst: VertexId
    label: NotRequired[Label]


@with_config(_FROZEN)
class VertexInsert(TypedDict):
    op: Literal["insert_vertex"]
    id: VertexId
    label: NotRequired[Label]


@with_config(_FROZEN)
class VertexDelete(TypedDict):
    op: Literal["delete_vertex"]
    id: VertexId


UpdateDoc = Annotated[EdgeInsert | EdgeDelete | VertexInsert | VertexDelete,
                      Field(discriminator="op")]


class QueryVertex(BaseModel):
    model_config = _FROZEN
    id: StrictInt
    label: Label | None = None


class QueryEdge(BaseModel):
    model_config = _FROZEN
    src: StrictInt
    dst: StrictInt
    label: Label | None = None


class QueryDoc(BaseModel):
    """A standing query as users write it (``null`` label = wildcard).

    Beyond this schema (JSON Schema cannot say it) a query is refused with 422 when a
    vertex id is declared twice, an edge joins a vertex to itself or names an undeclared
    vertex, an edge is repeated, or the query is not connected."""

    model_config = _FROZEN
    vertices: list[QueryVertex] = Field(min_length=2, max_length=MAX_QUERY_VERTICES)
    edges: list[QueryEdge] = Field(min_length=1, max_length=MAX_QUERY_VERTICES ** 2)
    count: Literal["subgraphs", "embeddings"] = "subgraphs"
    list_matches: StrictBool = False
    max_matches_per_update: int = Field(1000, ge=0, le=100_000)
    emit_initial: StrictBool = False
    name: str | None = Field(None, max_length=200)

    def to_spec(self) -> QuerySpec:
        """Raises QueryError (disconnected, duplicate edges, ...)."""
        q = Query.build([(v.id, v.label) for v in self.vertices],
                        [(e.src, e.dst, e.label) for e in self.edges])
        return QuerySpec(q, CountMode(self.count), list_matches=self.list_matches,
                         max_matches_per_update=self.max_matches_per_update)


class Columns(BaseModel):
    model_config = _FROZEN
    op: list[Literal[0, 1, 2, 3]]
    src: list[VertexId]
    dst: list[VertexId]
    label: list[Label]


class _UpdatesMsg(BaseModel):
    model_config = _FROZEN
    updates: list[UpdateDoc] | None = Field(None, min_length=1,
                                            max_length=MAX_UPDATES_PER_MESSAGE)
    columns: Columns | None = None
    arrived_at: float | None = None


class _RegisterMsg(BaseModel):
    model_config = _FROZEN
    kind: Literal["register"]
    query: QueryDoc


class _UnregisterMsg(BaseModel):
    model_config = _FROZEN
    kind: Literal["unregister"]
    id: StrictInt


class _LoadMsg(BaseModel):
    model_config = _FROZEN
    kind: Literal["load"]
    load: str = Field(min_length=1, max_length=64)
    part: int = Field(ge=0)
    parts: int = Field(ge=1)
    vertex_ids: list[VertexId] = []
    vertex_labels: list[Label] = []
    columns: Columns


@dataclass(frozen=True, slots=True)
class Updates:
    """Raw updates of one message as engine columns (vertex ops: id in ``src``)."""

    op: npt.NDArray[np.int8]
    src: npt.NDArray[np.int64]
    dst: npt.NDArray[np.int64]
    label: npt.NDArray[np.int32]
    arrived_at: float | None = None

    def __len__(self) -> int:
        return len(self.op)


@dataclass(frozen=True, slots=True)
class Register:
    query: QueryDoc


@dataclass(frozen=True, slots=True)
class Unregister:
    id: int


@dataclass(frozen=True, slots=True)
class LoadPart:
    load: str
    part: int
    parts: int
    vertex_ids: npt.NDArray[np.int64]
    vertex_labels: npt.NDArray[np.int32]
    edges: Updates


Control = Register | Unregister | LoadPart
_CONTROL: TypeAdapter[_RegisterMsg | _UnregisterMsg | _LoadMsg] = TypeAdapter(
    Annotated[_RegisterMsg | _UnregisterMsg | _LoadMsg, Field(discriminator="kind")])
_UPDATES = TypeAdapter(_UpdatesMsg)
_OPS = {"insert": UpdateOp.INSERT_EDGE, "delete": UpdateOp.DELETE_EDGE,
        "insert_vertex": UpdateOp.INSERT_VERTEX, "delete_vertex": UpdateOp.DELETE_VERTEX}


def error_text(exc: _ValidationError, limit: int = 5) -> str:
    """Pydantic errors as one line: ``updates.3.src: Input should be a valid integer``."""
    parts = []
    for err in exc.errors()[:limit]:
        loc = ".".join(str(x) for x in err["loc"])
        parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
    more = exc.error_count() - limit
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def updates_from_docs(docs: list[Any], arrived_at: float | None = None) -> Updates:
    """Validated update objects to columns; raises DecodeError on a self-loop."""
    n = len(docs)
    op = np.fromiter((_OPS[d["op"]] for d in docs), np.int8, n)
    src = np.fromiter((d["src"] if "src" in d else d["id"] for d in docs), np.int64, n)
    dst = np.fromiter((d.get("dst", -1) for d in docs), np.int64, n)
    label = np.fromiter((d.get("label", 0) for d in docs), np.int32, n)
    return _checked(op, src, dst, label, arrived_at)


def _checked(op: npt.NDArray[np.int8], src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64],
             label: npt.NDArray[np.int32], arrived_at: float | None,
             where: str = "updates") -> Updates:
    edge = op <= UpdateOp.DELETE_EDGE
    loops = np.flatnonzero(edge & (src == dst))
    if len(loops):
        i = int(loops[0])
        raise DecodeError(f"{where}.{i}: self-loop on vertex {int(src[i])} is not allowed")
    dst = np.where(edge, dst, -1)
    return Updates(op=op, src=src, dst=dst, label=label, arrived_at=arrived_at)


def _from_columns(c: Columns, where: str) -> tuple[npt.NDArray[np.int8], ...]:
    n = len(c.op)
    for name in ("src", "dst", "label"):
        if len(getattr(c, name)) != n:
            raise DecodeError(f"{where}.{name}: {len(getattr(c, name))} values for {n} ops")
    return (np.array(c.op, np.int8), np.array(c.src, np.int64), np.array(c.dst, np.int64),
            np.array(c.label, np.int32))


def decode(value: bytes | None) -> Updates | Control:
    """One topic message; raises DecodeError with a reason fit for the dead-letter topic."""
    if not value:
        raise DecodeError("empty message")
    fast = scan_updates(value, MAX_UPDATES_PER_MESSAGE)   # the common update message
    if fast is not None:
        return _checked(*fast)
    return _decode_full(value)


def warm_up_codecs() -> None:
    """Compile (or load) the update scanner and the delta formatter now rather than on
    the first message."""
    decode(b'{"updates": [{"op": "insert", "src": 1, "dst": 2}], "arrived_at": 0.5}')
    warm_up_formatter()


def _decode_full(value: bytes) -> Updates | Control:
    """Any message, validated by the schema (the one definition of what is wrong)."""
    try:   # update messages validated straight from the bytes, in Rust; the rest below
        return _updates(_UPDATES.validate_json(value))
    except (_ValidationError, DecodeError):
        pass   # a control record, or bad input: the slow path below says what is wrong
    try:
        head = json.loads(value)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DecodeError(f"not JSON: {exc}") from None
    if not isinstance(head, dict):
        raise DecodeError("a message must be a JSON object")
    try:
        if "kind" in head:
            return _control(_CONTROL.validate_python(head))
        msg = _UPDATES.validate_python(head)
    except _ValidationError as exc:
        raise DecodeError(error_text(exc)) from None
    return _updates(msg)


def _updates(msg: _UpdatesMsg) -> Updates:
    if (msg.updates is None) == (msg.columns is None):
        raise DecodeError("a message needs exactly one of 'updates' and 'columns'")
    if msg.updates is not None:
        return updates_from_docs(msg.updates, msg.arrived_at)
    assert msg.columns is not None
    return _checked(*_from_columns(msg.columns, "columns"), msg.arrived_at, "columns")


def _control(m: _RegisterMsg | _UnregisterMsg | _LoadMsg) -> Control:
    if isinstance(m, _RegisterMsg):
        return Register(m.query)
    if isinstance(m, _UnregisterMsg):
        return Unregister(m.id)
    if len(m.vertex_ids) != len(m.vertex_labels):
        raise DecodeError("vertex_ids and vertex_labels differ in length")
    if m.part >= m.parts:
        raise DecodeError(f"part {m.part} of {m.parts}")
    op, src, dst, label = _from_columns(m.columns, "columns")
    return LoadPart(m.load, m.part, m.parts, np.array(m.vertex_ids, np.int64),
                    np.array(m.vertex_labels, np.int32),
                    _checked(op, src, dst, label, None, "columns"))


def encode_updates(u: Updates) -> bytes:
    """The columnar form (what REST appends): cheap to write and to read back."""
    return json.dumps({"columns": {"op": u.op.tolist(), "src": u.src.tolist(),
                                   "dst": u.dst.tolist(), "label": u.label.tolist()},
                       "arrived_at": u.arrived_at}, separators=(",", ":")).encode()


def encode_control(c: Control) -> bytes:
    if isinstance(c, Register):
        body: dict[str, Any] = {"kind": "register", "query": c.query.model_dump()}
    elif isinstance(c, Unregister):
        body = {"kind": "unregister", "id": c.id}
    else:
        e = c.edges
        body = {"kind": "load", "load": c.load, "part": c.part, "parts": c.parts,
                "vertex_ids": c.vertex_ids.tolist(), "vertex_labels": c.vertex_labels.tolist(),
                "columns": {"op": e.op.tolist(), "src": e.src.tolist(), "dst": e.dst.tolist(),
                            "label": e.label.tolist()}}
    return json.dumps(body, separators=(",", ":")).encode()



_NAMES = {int(v): k for k, v in _OPS.items()}


def docs_from_batch(batch: Any) -> list[dict[str, Any]]:
    """An UpdateBatch as REST update objects (for clients replaying files or generators)."""
    out: list[dict[str, Any]] = []
    for op, s, d, lab in zip(batch.op.tolist(), batch.src.tolist(), batch.dst.tolist(),
                             batch.label.tolist(), strict=True):
        if op <= UpdateOp.DELETE_EDGE:
            out.append({"op": _NAMES[op], "src": s, "dst": d, "label": lab})
        elif op == UpdateOp.INSERT_VERTEX:
            out.append({"op": _NAMES[op], "id": s, "label": lab})
        else:
            out.append({"op": _NAMES[op], "id": s})
    return out


def doc_from_query(q: Query, **options: Any) -> dict[str, Any]:
    """A Query as the REST body that registers it (``options``: count, list_matches...)."""
    return {"vertices": [{"id": i, "label": lab} for i, lab in enumerate(q.vertex_labels)],
            "edges": [{"src": a, "dst": b, "label": lab} for a, b, lab in q.edges], **options}
