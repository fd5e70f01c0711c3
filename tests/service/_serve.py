"""``csm serve`` with default settings as a subprocess on its own state directory."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from service.client import CsmClient
from streams.broker import free_port

ROOT = Path(__file__).resolve().parents[2]


def serve_env(state: Path, port: int, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CSM_") or k == "CSM_LOG_LEVEL"}
    env.update(CSM_STATE_DIR=str(state), CSM_PORT=str(port), CSM_BACKEND="cpu",
               PYTHONPATH=str(ROOT), **extra)
    return env


class Service:
    """``csm serve`` as a subprocess on a state directory, and its broker processes."""

    def __init__(self, state: Path, log: Path, *args: str, **extra: str) -> None:
        self.state, self.log, self.port = state, log, free_port()
        self.args, self.extra = args, extra
        self.p: subprocess.Popen[bytes] | None = None

    def start(self, crash_at: str | None = None) -> None:
        env = serve_env(self.state, self.port, **self.extra)
        if crash_at:
            env["CSM_CRASH_AT"] = crash_at
        with self.log.open("ab") as err:
            self.p = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", *self.args],
                                      cwd=ROOT,
                                      env=env, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=err)
        with CsmClient(self.url) as c:
            c.wait_ready(180)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def broker_pids(self) -> list[int]:
        f = self.state / "broker" / "broker.json"
        if not f.exists():
            return []
        d = json.loads(f.read_text())
        return [d["tansu"]["pid"], d["objstore"]["pid"]]

    def bootstrap(self) -> str:
        d = json.loads((self.state / "broker" / "broker.json").read_text())
        return f"127.0.0.1:{d['tansu']['port']}"

    def wait_killed(self) -> None:
        assert self.p is not None
        self.p.wait(60)
        assert self.p.returncode == -signal.SIGKILL, self.log.read_text()[-3000:]

    def kill(self, broker_too: bool = False) -> None:
        if self.p is not None and self.p.poll() is None:
            os.kill(self.p.pid, signal.SIGKILL)
            self.p.wait(60)
        if broker_too:   # a machine restart: nothing of the old processes is left
            for pid in self.broker_pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)



    def stop(self) -> None:
        """A clean stop (SIGTERM): the service stops its broker processes too."""
        if self.p is not None and self.p.poll() is None:
            self.p.terminate()
            self.p.wait(60)
        self.kill(broker_too=True)   # only where the clean stop left any
