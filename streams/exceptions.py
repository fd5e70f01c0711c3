"""Errors of the stream and file-format layer.

    CsmError (gpu.exceptions)
    └── StreamError          root of this package
        └── FormatError      bad input in a file: names the file and the line
"""

from __future__ import annotations

from gpu.exceptions import CsmError

__all__ = ["FormatError", "StreamError"]


class StreamError(CsmError):
    """Root of the streams package's errors."""


class FormatError(StreamError):
    """A file that does not follow its format; nothing from it has been applied."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")
        self.path, self.line, self.reason = path, line, message
