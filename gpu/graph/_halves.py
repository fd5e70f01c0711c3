"""Open-addressing tables of pairs split in two halves by the hash's top bit, each probed
within itself (linear probing wraps inside the half).

The alive-edge set (``_edgeset``) and the pending table (``_pending``) are laid out so,
with the same bit: the updater's two threads (``_split``) each own the pairs of one half
and never write where the other probes. A half is never full as long as the whole table
is kept under half load (a half holds at most every pair, fewer than its slots).
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = ["half_home", "half_next", "half_of"]

_TOP = np.uint64(63)


@nb.njit(cache=True, nogil=True, inline="always")
def half_of(h):  # type: ignore[no-untyped-def]
    """Which half (0 or 1) hash ``h`` falls in: the thread that owns its pair."""
    return np.int64(h >> _TOP)


@nb.njit(cache=True, nogil=True, inline="always")
def half_home(h, mask):  # type: ignore[no-untyped-def]
    """The first slot of hash ``h``'s walk in a table of ``mask + 1`` slots (a power of
    two, at least 2)."""
    low = mask >> np.uint64(1)
    return ((h >> _TOP) * (low + np.uint64(1))) | (h & low)


@nb.njit(cache=True, nogil=True, inline="always")
def half_next(i, mask):  # type: ignore[no-untyped-def]
    """The slot after ``i`` on its walk: the next one, wrapping within i's half."""
    low = mask >> np.uint64(1)
    return (i & ~low) | ((i + np.uint64(1)) & low)
