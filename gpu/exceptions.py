"""Errors raised by the matching runtime.

    CsmError                 root of every error the project raises on purpose
    └── EngineError          root of this package
        ├── QueryError       a query that cannot be registered (disconnected, too large, ...)
        ├── BackendError     a backend that cannot run here (no CuPy, no device)
        └── UnknownQueryError  a query id the engine does not hold
"""

from __future__ import annotations

__all__ = ["BackendError", "CsmError", "EngineError", "QueryError", "UnknownQueryError"]


class CsmError(Exception):
    """Root of all csm-service errors; the CLI maps it to exit code 2."""


class EngineError(CsmError):
    """Root of the matching runtime's errors."""


class QueryError(EngineError):
    """The query is not a connected simple graph of 2..12 vertices with valid labels."""


class BackendError(EngineError):
    """The requested backend is not available on this machine."""


class UnknownQueryError(EngineError):
    """No query with this id is registered."""
