"""Positional constructors for the frozen record types on a small batch's path.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` looked
up by name: 1.7-2.8 us for OpTable's ten fields here, and a pipelined batch builds three
such records (its OpTable, BatchStats and BatchResult) in a host path of 15-25 us a batch
of 8 on the H200's host. The slots' own descriptors set the same fields in 0.85 us; the
records stay frozen to everyone else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["positional"]

T = TypeVar("T")


def positional(cls: type[T]) -> Callable[..., T]:
    """A constructor of ``cls`` (a frozen dataclass with slots) taking every field
    positionally, in order, with no defaults and no checks (callers on hot paths pass
    what ``__init__`` would store)."""
    names = [f.name for f in dataclasses.fields(cls)]   # type: ignore[arg-type]
    if not getattr(cls, "__slots__", None) or list(cls.__slots__) != names:   # type: ignore[attr-defined]
        raise TypeError(f"{cls.__name__} is not a dataclass with slots")
    scope: dict[str, Any] = {"new": object.__new__, "cls": cls}
    scope.update({f"set_{n}": cls.__dict__[n].__set__ for n in names})
    body = "".join(f"    set_{n}(o, {n})\n" for n in names)
    exec(f"def make({', '.join(names)}):\n    o = new(cls)\n{body}    return o\n", scope)  # noqa: S102
    make = scope["make"]
    make.__doc__ = f"{cls.__name__}({', '.join(names)}), built without its frozen setattr."
    return make  # type: ignore[no-any-return]
