"""Waiting on a condition of a service under test, never for a fixed time."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable


def wait_until(cond: Callable[[], bool], what: str, proc: subprocess.Popen[bytes],
               timeout: float = 120.0, every: float = 0.05) -> None:
    """Poll ``cond()`` until true. Between polls the wait blocks on ``proc`` (the service
    whose state the condition reads), so its exit ends the wait at once, with its exit
    code, instead of a timeout. Exceptions of ``cond`` (a refused connection once the
    service is gone) reach the caller."""
    deadline = time.monotonic() + timeout
    while not cond():
        if proc.poll() is not None:
            raise AssertionError(f"{what}: the process exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(every)
