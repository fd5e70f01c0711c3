"""The state directory: the durable embedded broker's objects and the runtime's snapshots.

Layout (``CSM_STATE_DIR``, by default ``$XDG_DATA_HOME/csm`` or ``~/.local/share/csm``)::

    csm-state.json   format marker: {"format": 1}; written once, when the folder is new
    lock             flock'ed by the one service using the folder; holds its pid
    broker/          streams.durable.DurableBroker (objects/, broker.json, broker.log)
    snapshots/       service.snapshot files

Opening checks before anything is written: a folder that is not empty and has no marker,
or a marker we cannot read, is refused (:class:`StateCorrupt`), and so is a folder
locked by a live service (:class:`StateLocked`). Nothing is ever deleted or rewritten
to "repair" a folder; the message says what to look at.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path

from .exceptions import StateCorrupt, StateLocked

__all__ = ["FORMAT", "StateDir", "default_state_dir"]

FORMAT = 1
_MARKER = "csm-state.json"
_KNOWN = {_MARKER, "lock", "broker", "snapshots"}


def default_state_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "csm"


class StateDir:
    """``with StateDir(path).open() as st: st.broker, st.snapshots``; the lock is held
    until :meth:`close` (or the process dies: the kernel drops it)."""

    def __init__(self, path: Path) -> None:
        self.path = path.expanduser().absolute()
        self._fd: int | None = None

    @property
    def broker(self) -> Path:
        return self.path / "broker"

    @property
    def snapshots(self) -> Path:
        return self.path / "snapshots"

    def open(self) -> StateDir:
        p = self.path
        if p.exists() and not p.is_dir():
            raise StateCorrupt(f"state directory {p} is not a directory")
        p.mkdir(parents=True, exist_ok=True)
        marker = p / _MARKER
        if marker.exists():
            self._check_marker(marker)
        else:
            stray = sorted(x.name for x in p.iterdir() if x.name not in _KNOWN)
            if stray or (p / "broker").exists() or (p / "snapshots").exists():
                raise StateCorrupt(
                    f"state directory {p} has data but no {_MARKER} (found: "
                    f"{', '.join(stray or ['broker/', 'snapshots/'])[:200]}); it is not "
                    "one of ours or it is damaged: point CSM_STATE_DIR elsewhere, or move "
                    "it aside; nothing was changed")
        self._lock()
        if not marker.exists():
            tmp = p / (_MARKER + ".tmp")
            tmp.write_text(json.dumps({"format": FORMAT}))
            os.replace(tmp, marker)
        self.broker.mkdir(exist_ok=True)
        self.snapshots.mkdir(exist_ok=True)
        return self

    def _check_marker(self, marker: Path) -> None:
        try:
            fmt = json.loads(marker.read_text()).get("format")
        except (OSError, ValueError, AttributeError) as exc:
            raise StateCorrupt(f"state directory {self.path}: {marker.name} cannot be read "
                               f"({type(exc).__name__}); nothing was changed") from None
        if fmt != FORMAT:
            raise StateCorrupt(f"state directory {self.path}: format {fmt!r}, this version "
                               f"reads format {FORMAT}; nothing was changed")

    def _lock(self) -> None:
        fd = os.open(self.path / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise StateLocked(f"state directory {self.path} is in use by another csm serve "
                              f"(pid {holder}); stop it, or set CSM_STATE_DIR to another "
                              "folder") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def __enter__(self) -> StateDir:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()
