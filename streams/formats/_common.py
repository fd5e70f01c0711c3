"""Shared pieces of the text parsers: typed tokens with file:line errors."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from gpu import WILDCARD

from ..exceptions import FormatError

_I64 = np.iinfo(np.int64)
_I32 = np.iinfo(np.int32)


@dataclass(frozen=True, slots=True)
class GraphData:
    """An initial graph as columns; vertices without a declaration get label 0."""

    vertex_ids: npt.NDArray[np.int64]
    vertex_labels: npt.NDArray[np.int32]
    src: npt.NDArray[np.int64]
    dst: npt.NDArray[np.int64]
    label: npt.NDArray[np.int32]

    @property
    def num_edges(self) -> int:
        return len(self.src)


class Lines:
    """Non-blank lines of a file with their 1-based numbers; raises on empty files."""

    def __init__(self, path: str | Path, comment: str | None = None) -> None:
        self.path = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise FormatError(self.path, None, "file not found") from None
        except UnicodeDecodeError as exc:
            raise FormatError(self.path, None, f"not a UTF-8 text file ({exc.reason})") from None
        except OSError as exc:
            raise FormatError(self.path, None, exc.strerror or str(exc)) from None
        self._lines = text.splitlines()
        self._comment = comment
        if not any(self._payload()):
            raise FormatError(self.path, None, "file is empty")

    def _payload(self) -> Iterator[tuple[int, list[str]]]:
        for i, line in enumerate(self._lines, 1):
            s = line.strip()
            if not s or (self._comment and s.startswith(self._comment)):
                continue
            yield i, s.split()

    def __iter__(self) -> Iterator[tuple[int, list[str]]]:
        return self._payload()

    def error(self, line: int, message: str) -> FormatError:
        return FormatError(self.path, line, message)

    def vid(self, tok: str, line: int) -> int:
        try:
            v = int(tok)
        except ValueError:
            raise self.error(line, f"vertex id {tok!r} is not an integer") from None
        if not _I64.min <= v <= _I64.max:
            raise self.error(line, f"vertex id {tok} is out of the 64-bit range")
        return v

    def label(self, tok: str, line: int, wildcard: bool = False) -> int | None:
        if wildcard and tok == "*":
            return None
        try:
            v = int(tok)
        except ValueError:
            raise self.error(line, f"label {tok!r} is not an integer") from None
        if not int(WILDCARD) < v <= _I32.max:
            raise self.error(line, f"label {tok} is out of the 32-bit range")
        return v

    def arity(self, toks: list[str], line: int, lo: int, hi: int, what: str) -> None:
        if not lo <= len(toks) <= hi:
            want = str(lo) if lo == hi else f"{lo}-{hi}"
            raise self.error(line, f"{what} needs {want} fields, got {len(toks)}: "
                             f"{' '.join(toks)!r}")


def graph_data(vids: list[int], vlabels: list[int], src: list[int], dst: list[int],
               labels: list[int]) -> GraphData:
    return GraphData(np.array(vids, np.int64), np.array(vlabels, np.int32),
                     np.array(src, np.int64), np.array(dst, np.int64),
                     np.array(labels, np.int32))
