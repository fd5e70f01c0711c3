"""The host multi-version graph: one entry pool of sorted neighbour arrays with lifetimes,
resolved and versioned on the CPU (numba), and the external-id map the device shares.

    _host.py      HostGraph: load, apply (copy-on-write versions), watermark, compaction
    _kernels.py   the updater's numba loops (resolve a batch in arrival order)
    _split.py     a large in-place batch resolved on two threads, split by pair
    _halves.py    the pair tables' two halves (one a thread): the edge set, the pending table
    _pending.py   an in-place batch's edge insertions, waiting to be merged
    _merge.py     merging them into each touched version once
    _idmap.py     external id -> dense id (open addressing, numba)
"""

from ._host import HostGraph, LoadStats, OpTable
from ._idmap import IdMap

__all__ = ["HostGraph", "IdMap", "LoadStats", "OpTable"]
