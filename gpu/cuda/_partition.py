"""SMs that matching leaves free for the updater: the match lanes in a green context.

Why: each block of the device resolver and of build_units needs a whole SM (1,024
threads at 64 registers), and the match kernels of the other lanes keep blocks on every
SM, so a small launch's front waited for an SM to empty (design.md 2p: fronts p99
0.5-0.6 ms at 100,000 updates/s, p50 0.65 ms at 300,000/s). A green context (CUDA driver
12.4+, reached through ctypes: CuPy has no binding) holds the match lanes' streams to all
but ``front_sms`` SMs; the updater stays in the primary context, so a small front finds
those SMs free at once and a large one still spreads over every SM (the updater in a
green context of its own made one-batch Enron runs 1.3-2.3x slower: design.md 2r).
Kernels CuPy loaded in the primary context run on a green context's streams, memory is
shared, and a captured kernel keeps the SMs of the stream it was captured on.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from typing import Any

from ..exceptions import BackendError
from .kernels import cupy_or_raise

__all__ = ["Partition", "partition"]

_SM = 1                 # CU_DEV_RESOURCE_TYPE_SM
_DEFAULT_STREAM = 1     # CU_GREEN_CTX_DEFAULT_STREAM (required)
_NON_BLOCKING = 1       # CU_STREAM_NON_BLOCKING (required of a green context's streams)


class _Resource(ctypes.Structure):
    """CUdevResource (cuda.h, resource ABI 1): a type, 92 bytes, a 48-byte union whose
    SM member begins with the SM count."""

    _fields_ = [("type", ctypes.c_int), ("_pad", ctypes.c_ubyte * 92),
                ("sm_count", ctypes.c_uint), ("min_partition", ctypes.c_uint),
                ("alignment", ctypes.c_uint), ("_rest", ctypes.c_ubyte * 36)]


class _Handle:
    """A raw stream handle in the __cuda_stream__ protocol (CuPy's from_external)."""

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def __cuda_stream__(self) -> tuple[int, int]:
        return 0, self.ptr


@dataclass(frozen=True, slots=True)
class Partition:
    """The SMs matching leaves free, and the match lanes' green context."""

    front_sms: int
    match_sms: int
    _match: int     # the CUgreenCtx handle

    def match_stream(self) -> Any:
        """A CuPy stream on the match lanes' SMs."""
        return _stream(self._match)


@functools.cache
def _driver() -> Any:
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise BackendError(f"SM partitions need the CUDA driver library: {exc}") from exc


def _check(code: int, what: str) -> None:
    if code:
        name = ctypes.c_char_p()
        _driver().cuGetErrorName(code, ctypes.byref(name))
        err = name.value.decode() if name.value else str(code)
        raise BackendError(f"SM partition: {what} failed ({err}; green contexts need a "
                           f"CUDA 12.4+ driver)")


def _stream(green: int) -> Any:
    """A CuPy stream in green context ``green`` (kept for the process's life: the slot
    pool that takes these is the process's, gpu/cuda/_executor.py ``_slot_pool``)."""
    cp = cupy_or_raise()
    ptr = ctypes.c_void_p()
    _check(_driver().cuGreenCtxStreamCreate(ctypes.byref(ptr), ctypes.c_void_p(green),
                                            _NON_BLOCKING, 0), "cuGreenCtxStreamCreate")
    handle = _Handle(int(ptr.value or 0))
    wrap = getattr(cp.cuda.Stream, "from_external", None)
    return wrap(handle) if wrap is not None else cp.cuda.ExternalStream(handle.ptr)


def partition(device: int, front_sms: int) -> Partition:
    """``front_sms`` SMs of ``device`` (rounded up to the device's partition granule: 8
    on sm_90) left free of matching, the rest a green context for it; one per process and
    rounded count (the match lanes that take its streams are the process's too)."""
    cupy_or_raise().cuda.runtime.free(0)   # the primary context exists before green ones
    whole = _whole(device)
    if not 0 < front_sms < whole.sm_count:
        raise BackendError(f"front_sms must be 1..{whole.sm_count - 1} on this device "
                           f"({whole.sm_count} SMs), not {front_sms}")
    step = max(whole.alignment, 1)
    return _split(device, max(whole.min_partition, -(-front_sms // step) * step))


def _whole(device: int) -> _Resource:
    whole = _Resource()
    _check(_driver().cuDeviceGetDevResource(device, ctypes.byref(whole), _SM),
           "cuDeviceGetDevResource")
    return whole


@functools.cache
def _split(device: int, front_sms: int) -> Partition:
    cu = _driver()
    whole = _whole(device)
    part, rest, groups = _Resource(), _Resource(), ctypes.c_uint(1)
    _check(cu.cuDevSmResourceSplitByCount(ctypes.byref(part), ctypes.byref(groups),
                                          ctypes.byref(whole), ctypes.byref(rest), 0,
                                          front_sms), "cuDevSmResourceSplitByCount")
    if groups.value != 1 or rest.sm_count == 0:
        raise BackendError(f"front_sms {front_sms} leaves no SMs for matching on this "
                           f"device ({whole.sm_count} SMs, granule {whole.alignment})")
    desc, green = ctypes.c_void_p(), ctypes.c_void_p()
    _check(cu.cuDevResourceGenerateDesc(ctypes.byref(desc), ctypes.byref(rest), 1),
           "cuDevResourceGenerateDesc")
    _check(cu.cuGreenCtxCreate(ctypes.byref(green), desc, device, _DEFAULT_STREAM),
           "cuGreenCtxCreate")
    return Partition(int(part.sm_count), int(rest.sm_count), int(green.value or 0))
