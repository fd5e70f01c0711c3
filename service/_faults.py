"""Crash points for the crash tests: ``CSM_CRASH_AT=point:n`` kills this process with
SIGKILL at the n-th time it reaches ``point`` (1-based). Unset: one dict lookup.

Points: ``append`` (a request, before its record reaches the log), ``publish`` (the
runtime holds records the log has, before any of their deltas is sent), ``commit``
(their deltas are acknowledged, the offset is not committed yet).
"""

from __future__ import annotations

import os
import signal

__all__ = ["crash_point"]


def _parse(spec: str | None) -> tuple[str, int] | None:
    if not spec:
        return None
    name, _, n = spec.partition(":")
    return name, int(n or 1)


_AT = _parse(os.environ.get("CSM_CRASH_AT"))
_seen: dict[str, int] = {}


def crash_point(name: str) -> None:
    if _AT is None or _AT[0] != name:
        return
    _seen[name] = _seen.get(name, 0) + 1
    if _seen[name] == _AT[1]:
        os.kill(os.getpid(), signal.SIGKILL)
