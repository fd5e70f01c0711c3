"""File formats, one module each, chosen by name."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Literal

from gpu import UpdateBatch

from . import ar, csm, snap
from ._common import GraphData

__all__ = ["FORMATS", "FormatName", "GraphData", "ar", "csm", "read_graph", "read_stream",
           "snap"]

FormatName = Literal["csm", "snap", "ar"]
FORMATS: dict[str, ModuleType] = {"csm": csm, "snap": snap, "ar": ar}


def _module(fmt: str) -> ModuleType:
    return FORMATS[fmt]


def read_graph(path: str | Path, fmt: str = "csm") -> GraphData:
    reader: Callable[[str | Path], GraphData] = _module(fmt).read_graph
    return reader(path)


def read_stream(path: str | Path, fmt: str = "csm", first_seq: int = 0) -> UpdateBatch:
    reader: Callable[..., UpdateBatch] = _module(fmt).read_stream
    return reader(path, first_seq=first_seq)
