"""``leaf``: numba's ``njit`` for compiled helpers called per element (per update, per
merged vertex, per match unit) that allocate nothing.

With numba's runtime (NRT) on, a compiled function increfs every array argument on entry
and decrefs it on every exit: an atomic add on each array's meminfo. ``run_plan`` takes
28 arrays, so each call cost 56 atomic operations whatever it did, and the updater's and
the merge's helpers several each per update: on the Enron triangle a match unit cost
0.9 us of which 0.5 us was a call that returned at once. ``_nrt=False`` compiles a
function without reference counting. Such a function must not allocate (numba refuses
to compile it) and returns no new array; the arrays it reads stay alive through its
caller, which holds them.

``inline="always"`` is no way around a call for a helper that takes arrays: numba's IR
inlining binds each array to a new variable, and the increfs and decrefs of those aliases
land in blocks its pruning does not pair (issue 20 rounds 12 and 15: 21% of a one-batch
run's samples once). Where a leaf's call costs too much, write its few lines into the
loop that needs them.
"""

from __future__ import annotations

import numba as nb

__all__ = ["leaf"]

leaf = nb.njit(cache=True, nogil=True, _nrt=False)
