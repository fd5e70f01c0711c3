"""LLVM instructions numba does not expose on the CPU: atomic fetch-and-add.

``prange`` splits its range statically, so when one thread is slowed (the other core
busy, or a few heavy tasks) the other waits at the end; threads that take their next
task from a shared counter (:func:`fetch_add`) balance themselves.
"""

from __future__ import annotations

from typing import Any

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["fetch_add"]


def _pointer(context: Any, builder: Any, aryty: Any, arr: Any, idx: Any) -> Any:
    ary = context.make_array(aryty)(context, builder, arr)
    return cgutils.get_item_pointer(context, builder, aryty, ary, [idx])


@intrinsic
def fetch_add(typingctx: Any, arr: Any, idx: Any, val: Any) -> Any:  # noqa: ARG001
    """``arr[idx] += val`` atomically (int64 array); returns the value before."""
    if not isinstance(arr, types.Array) or arr.dtype != types.int64:
        return None
    sig = types.int64(arr, types.intp, types.int64)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        ptr = _pointer(context, builder, sig.args[0], args[0], args[1])
        return builder.atomic_rmw("add", ptr, args[2], "monotonic")

    return sig, codegen
