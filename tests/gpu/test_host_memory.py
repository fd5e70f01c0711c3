"""The first engine keeps freed host memory for the next batch's results (gpu/_host_memory.py):
checked by what it is for, page faults, in fresh processes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# 50 runs of eight 512 KB results kept until the run ends (200 MB, 51,200 pages written):
# minor page faults counted
_PROBE = """
import resource
import numpy as np
from gpu import Engine
Engine("cpu")
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    keep = []
    for _ in range(8):
        a = np.empty(1 << 16)
        a[:] = 1.0
        keep.append(a)
    del keep
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(**env: str) -> int:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": root, **env})
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator only")
def test_freed_result_memory_is_reused_without_page_faults() -> None:
    kept = _faults()
    defaults = _faults(CSM_MALLOC_DEFAULTS="1")
    assert defaults > 20_000   # glibc's defaults: most runs map their results afresh
    assert kept < 5_000        # the first run's pages, then reuse
