"""The one loader of the CUDA sources in this folder (CuPy RawModule).

CuPy is imported here and nowhere else at module level, so the package imports on
machines without it; :func:`cupy_or_raise` turns its absence into a BackendError.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from types import ModuleType
from typing import Any

from ...exceptions import BackendError

__all__ = ["BUILD_TILES", "COMPACT_RANGE", "LF_GMAX", "QUERY_WORDS", "QUEUE_COUNTERS", "TILE",
           "UPDATES_PER_BLOCK", "WARPS_PER_BLOCK", "cupy_or_raise", "kernel", "sm_count"]

_DIR = Path(__file__).parent

# launch shapes and buffer sizes the sources assume (must equal them)
#: update.cu TILE: the threads of a resolver block and of a build_units block (one a tile)
TILE = 1024
#: update.cu BUILD_TILES: edge-only tiles whose touched vertices get one new version together
BUILD_TILES = 32
#: update.cu LF_GMAX: updates of one pair the launch front replays (more: the tiles do)
LF_GMAX = 32
#: update.cu UPDATES_PER_BLOCK: a resolve of n updates takes one block per this many
UPDATES_PER_BLOCK = 8
#: update.cu COMPACT_RANGE: compact_pool's threads a block (and vertices a range)
COMPACT_RANGE = 256
#: match.cu WARPS_PER_BLOCK
WARPS_PER_BLOCK = 4
#: match.cu's counter words: next unit, queue head / tail, pushed, done, finished,
#: consumers, a line of 32 each
QUEUE_COUNTERS = 7 * 32
#: match.cu / update.cu Q_EACH: a pipelined launch's words for each query (its items, those
#: done, whether collected; a line of 32 each)
QUERY_WORDS = 3 * 32


def cupy_or_raise() -> ModuleType:
    """CuPy with a usable device, or a BackendError that says what is missing."""
    try:
        import cupy
    except ImportError as exc:
        raise BackendError("backend 'gpu' needs CuPy: pip install 'csm-service[gpu]'") from exc
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - any CUDA runtime failure means "no device"
        raise BackendError(f"backend 'gpu': CUDA finds no device ({exc})") from exc
    if n == 0:
        raise BackendError("backend 'gpu': CUDA finds no device")
    return cupy


@functools.cache
def _module(name: str) -> Any:
    cp = cupy_or_raise()
    # sources are self-contained (no #include of our own headers), so CuPy's cache key,
    # which covers the text and options, is complete; #line makes compiler messages name
    # the file
    path = _DIR / f"{name}.cu"
    code = f'#line 1 "{path.name}"\n' + path.read_text()
    return cp.RawModule(code=code, options=("-std=c++17", *_defines()))


def _defines() -> tuple[str, ...]:
    """Diagnostic builds: CSM_CUDA_PROBES=1 compiles update.cu's timing probes in
    (bench/probe_resolver.py; off, they compile to nothing); CSM_CUDA_LINEINFO=1 keeps
    source lines for a profiler's per-line counters (ncu's source view);
    CSM_CUDA_NO_LAUNCH_FRONT=1 resolves every launch tile by tile (an A/B of the launch
    front on one tree and one machine); CSM_CUDA_MATCH_BLOCKS=N bounds match.cu's kernels
    to N resident blocks an SM (registers for warps; 5 when unset); CSM_CUDA_INTERSECT_ILP=U
    the candidates a lane of an intersection searches at once (2 when unset; design.md 2t,
    2w, 2y), for lists of more than CSM_CUDA_ILP_MIN candidates (32 when unset). (The
    fused tail and the paired label search of stops 49-50, and the merge intersection of
    stop 52, were measured and taken out: design.md 2w, 2z.)"""
    flags = {"CSM_CUDA_PROBES": "-DCSM_PROBES", "CSM_CUDA_LINEINFO": "-lineinfo",
             "CSM_CUDA_NO_LAUNCH_FRONT": "-DCSM_NO_LAUNCH_FRONT"}
    out = [flag for var, flag in flags.items() if os.environ.get(var) == "1"]
    for var, define, least, most in (("CSM_CUDA_MATCH_BLOCKS", "MATCH_BLOCKS", 1, 16),
                                     ("CSM_CUDA_INTERSECT_ILP", "INTERSECT_ILP", 1, 8),
                                     ("CSM_CUDA_ILP_MIN", "ILP_MIN", 0, 1 << 20)):
        value = os.environ.get(var, "")
        if value:
            if not value.isdigit() or not least <= int(value) <= most:
                raise BackendError(f"{var} must be {least}..{most}, not {value!r}")
            out.append(f"-D{define}={int(value)}")
    return tuple(out)


def kernel(module: str, name: str) -> Any:
    """A compiled ``extern "C"`` kernel from gpu/cuda/kernels/<module>.cu."""
    return _module(module).get_function(name)


def sm_count() -> int:
    """The current device's SMs (grid sizes: the resolver's one block each, the match
    kernel's warps per SM)."""
    return _sm_count(int(cupy_or_raise().cuda.Device().id))


@functools.cache
def _sm_count(device: int) -> int:
    cp = cupy_or_raise()
    return int(cp.cuda.Device(device).attributes["MultiProcessorCount"])
