import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def _gpu_reason() -> str | None:
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed (pip install .[gpu])"
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            return "CuPy finds no CUDA device"
    except Exception as exc:  # noqa: BLE001
        return f"CuPy finds no CUDA device ({type(exc).__name__})"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = _gpu_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"gpu test skipped: {reason}")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)
