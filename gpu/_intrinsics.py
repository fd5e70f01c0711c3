"""LLVM instructions numba does not expose on the CPU: atomic fetch-and-add.

``prange`` splits its range statically, so when one thread is slowed (the other core
busy, or a few heavy tasks) the other waits at the end; threads that take their next
task from a shared counter (:func:`fetch_add`) balance themselves (the CPU executor's
units). The updater's two threads (``graph/_split``) meet between their phases on one.
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
    """``arr[idx] += val`` atomically (an int32 or int64 array; ``val`` cast to its
    type); returns the value before. Sequentially consistent: with ``val`` 0 it is a load
    that the compiler keeps inside a spin loop and orders before the loads after it."""
    if not isinstance(arr, types.Array) or arr.dtype not in (types.int32, types.int64):
        return None
    sig = arr.dtype(arr, types.intp, arr.dtype)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        ptr = _pointer(context, builder, sig.args[0], args[0], args[1])
        return builder.atomic_rmw("add", ptr, args[2], "seq_cst")

    return sig, codegen
