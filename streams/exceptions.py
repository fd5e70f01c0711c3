"""Errors of the stream layer: files, message codecs and the Kafka boundary.

    CsmError (gpu.exceptions)
    └── StreamError          root of this package
        ├── FormatError      bad input in a file: names the file and the line
        ├── DecodeError      a message on a topic that does not follow its schema
        ├── BrokerError      the embedded broker cannot start
        └── KafkaError       the Kafka cluster refused or could not be reached
"""

from __future__ import annotations

from gpu.exceptions import CsmError

__all__ = ["BrokerError", "DecodeError", "FormatError", "KafkaError", "StreamError"]


class StreamError(CsmError):
    """Root of the streams package's errors."""


class FormatError(StreamError):
    """A file that does not follow its format; nothing from it has been applied."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")
        self.path, self.line, self.reason = path, line, message


class DecodeError(StreamError):
    """A topic message that cannot be decoded; the runtime dead-letters it and goes on."""


class BrokerError(StreamError):
    """The embedded broker could not be started."""


class KafkaError(StreamError):
    """An aiokafka error, translated at the boundary (the cause is chained)."""
