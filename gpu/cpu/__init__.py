"""The CPU executor, the reference: incremental matching from each updated edge over the
host graph, in numba, on every core.

    _executor.py    CpuExecutor (registered as "cpu")
    _kernels.py     the per-task search: candidates, intersections, counting
    _sets.py        sorted-set intersections (merge and galloping)
"""

from ._executor import CpuExecutor

__all__ = ["CpuExecutor"]
