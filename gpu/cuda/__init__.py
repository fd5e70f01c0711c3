"""The CUDA executor (registered as "gpu"): the device owns the graph and runs each batch
as resolve -> units -> match -> collect, one captured launch per batch.

    kernels/          the one loader (CuPy RawModule) and the .cu sources:
      update.cu       graph updater (resolver on the grid), units, collection
      match.cu        the STMatch-style warp search with T-DFS splitting
    _updater.py       DeviceUpdater: the device-owned graph; DeviceGraphView, the
                      engine's handle on it
    _pipeline.py      DevicePipeline: control blocks in mapped memory, captured graphs,
                      batches in flight, fault recovery on the host path
    _executor.py      GpuExecutor: plans, units and the match kernel on either graph
    _device_graph.py  the device mirror of the host graph (mapped memory helpers)

The path of one update, drawn: docs/design.md, "Device-resident pipeline".
"""

from ._executor import GpuConfig, GpuExecutor
from ._pipeline import DevicePipeline
from ._updater import DeviceGraphView, DeviceUpdater

__all__ = ["DeviceGraphView", "DevicePipeline", "DeviceUpdater", "GpuConfig", "GpuExecutor"]
