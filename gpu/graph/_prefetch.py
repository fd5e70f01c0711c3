"""``prefetch(arr, i)``: LLVM's prefetch of ``arr[i]``'s cache line (numba has none).

The in-place merge (``_merge.py``) reads pending entries in owner order and each touched
vertex's row and version tail: one dependent miss after another on four arrays.
Touching those lines several entries early overlaps the misses (the updater's binary
searches measured no gain: their mispredicted branches, not misses, bound them). A
prefetch never faults and changes no value.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["prefetch"]

_I8P = ir.IntType(8).as_pointer()
_I32 = ir.IntType(32)


@intrinsic
def prefetch(typingctx: Any, arr: Any, idx: Any) -> Any:  # noqa: ARG001
    """Read-prefetch the line of ``arr[idx]`` into every cache level (idx in bounds)."""
    if not isinstance(arr, types.Array) or not isinstance(idx, types.Integer):
        return None
    sig = types.void(arr, types.intp)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        aryty = sig.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]],
                                       wraparound=False)
        fnty = ir.FunctionType(ir.VoidType(), [_I8P, _I32, _I32, _I32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        builder.call(fn, [builder.bitcast(ptr, _I8P), ir.Constant(_I32, 0),
                          ir.Constant(_I32, 3), ir.Constant(_I32, 1)])
        return context.get_dummy_value()

    return sig, codegen
