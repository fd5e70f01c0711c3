"""Freed host memory kept for the next batch's results.

Every batch's results are new numpy arrays (columns, counts) of up to hundreds of
kilobytes. glibc serves blocks above 128 KB with fresh mappings and returns them to the
kernel when they are freed (and trims the heap's top above 128 KB), so each batch's
results were written page fault by page fault: reading a 4,096-update launch's result
took 32 us on warm memory and 113 us on fresh pages (2-core VM; five reads a run, results
freed after each run: 497 -> 166 us), 155 us on the H100's host. Raising both thresholds
keeps freed blocks in the heap, where the next batch's results reuse them. It is
process-wide and set once, by the first engine; ``CSM_MALLOC_DEFAULTS=1`` leaves glibc's
defaults. Elsewhere than glibc nothing is changed."""

from __future__ import annotations

import ctypes
import os
import threading

__all__ = ["keep_freed_memory"]

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3   # glibc malloc.h
#: blocks up to this size come from the heap (glibc's own dynamic limit on 64-bit hosts)
MMAP_THRESHOLD = 32 << 20
#: free memory at the heap's top kept rather than returned to the kernel
TRIM_THRESHOLD = 256 << 20

_lock = threading.Lock()
_done: bool | None = None


def keep_freed_memory() -> bool:
    """Set the thresholds once a process; True where they are set (glibc, not opted out)."""
    global _done
    with _lock:
        if _done is None:
            _done = _set()
        return _done


def _set() -> bool:
    if os.environ.get("CSM_MALLOC_DEFAULTS") == "1":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):   # not glibc (musl, macOS): its own policy stays
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
