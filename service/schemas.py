"""The API's request and response bodies, one family per resource."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from streams.codec import QueryDoc, UpdateDoc

__all__ = ["ErrorBody", "GraphLoaded", "GraphSize", "MatchEvent", "MatchPage", "QueryCreate",
           "QueryPublic", "UpdatesAccepted", "UpdatesRequest"]

QueryCreate = QueryDoc


class UpdatesRequest(BaseModel):
    """Beyond this schema, an edge update with ``src == dst`` (a self-loop) is refused
    with 422 and nothing of the batch reaches the log."""

    model_config = ConfigDict(extra="forbid")
    updates: list[UpdateDoc] = Field(min_length=1)


class UpdatesAccepted(BaseModel):
    """Sequence numbers are ``offset * 1_000_000 + position``: increasing, not contiguous."""

    first_seq: int
    last_seq: int
    count: int


class QueryPublic(QueryDoc):
    id: int
    seq: int = Field(description="sequence number at which the query took effect")
    automorphisms: int
    plans: int


class MatchEvent(BaseModel):
    query: int
    seq: int
    sub: int = Field(description="position among the edge deletions of one vertex deletion")
    op: Literal["insert", "delete", "insert_vertex", "delete_vertex", "initial"]
    src: int | None
    dst: int | None
    sign: Literal[-1, 1]
    count: int
    matches: list[list[int]] | None
    truncated: bool
    arrived_at: float
    published_at: float


class MatchPage(BaseModel):
    query: int
    events: list[MatchEvent]


class GraphLoaded(BaseModel):
    vertices: int
    edges: int
    self_loops: int
    duplicates: int
    seconds: float


class GraphSize(BaseModel):
    """The graph as of the last processed update-log record."""

    vertices: int
    edges: int
    offset: int


class ErrorBody(BaseModel):
    detail: str
