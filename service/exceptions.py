"""Errors of the service layer; ``app.py`` maps each to one HTTP status, once.

    CsmError (gpu.exceptions)
    └── ServiceError           root of this package
        ├── BadRequest         422: the body names what is wrong
        ├── TooLarge           413: body or batch over its bound
        ├── Unauthorized       401: missing or wrong bearer token
        ├── GraphNotEmpty      409: POST /v1/graph after the graph has content
        ├── NotReady           503: the runtime is still starting or has stopped
        ├── NotOwner           307: another instance of the group publishes this query
        └── StateError         the state directory cannot be used (csm serve exits 2)
            ├── StateLocked    another service holds its lock
            └── StateCorrupt   not ours, damaged, or a snapshot that does not read back

Engine and stream errors keep their own classes: QueryError 422, UnknownQueryError 404,
DecodeError 422, KafkaError 503.
"""

from __future__ import annotations

from gpu.exceptions import CsmError

__all__ = ["BadRequest", "GraphNotEmpty", "NotOwner", "NotReady", "ServiceError",
           "StateCorrupt", "StateError", "StateLocked", "TooLarge", "Unauthorized"]


class ServiceError(CsmError):
    """Root of the service's errors."""


class BadRequest(ServiceError):
    """The request is well-formed HTTP but its content is invalid."""


class TooLarge(ServiceError):
    """A body or a batch over the configured bound."""


class Unauthorized(ServiceError):
    """A write without the configured bearer token."""


class GraphNotEmpty(ServiceError):
    """The initial graph can only be loaded into an empty graph."""


class NotReady(ServiceError):
    """The runtime cannot take this request now."""


class NotOwner(ServiceError):
    """Scale-out: the query's deltas are published (and its recent deltas kept) by
    another instance; ``url`` is where that one answers."""

    def __init__(self, message: str, *, instance: str, url: str) -> None:
        super().__init__(message)
        self.instance, self.url = instance, url


class StateError(ServiceError):
    """The state directory cannot be used; nothing in it was changed."""


class StateLocked(StateError):
    """Another running service holds the state directory."""


class StateCorrupt(StateError):
    """The state directory is not ours, is damaged, or holds an unreadable snapshot."""
