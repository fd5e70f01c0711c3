"""Graphs larger than the GPU: the graph stays in mapped host memory (zero-copy) and a
device cache holds what random walks estimate the batch will read (GCSM).

    _estimate.py   the walk-based estimate of each vertex's reads (and the exact count)
    _walks.py      the merged random walks (numba)
    _cache.py      DeviceCache: ranking by estimated saving, fitting, loading
"""

from ._cache import DeviceCache
from ._estimate import Estimate, WalkConfig, estimate_reads

__all__ = ["DeviceCache", "Estimate", "WalkConfig", "estimate_reads"]
