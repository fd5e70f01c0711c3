"""The durable embedded broker: Tansu on ``s3://`` storage served by our object server.

Two supervised processes, both with their data under one folder (the service's state
directory gives it ``<state>/broker``):

- ``python -m streams.objstore`` keeps the objects as fsynced files (``objects/``);
- ``tansu broker --storage-engine s3://tansu/`` pointed at it.

They run in their own session, so a kill -9 of the service leaves them serving: the next
:meth:`DurableBroker.start` finds them through ``broker.json`` (pids and ports) and
reattaches. Where they are gone too (a machine restart), it starts new ones on the same
objects. While the service runs, a watchdog thread starts the pair again (same files,
same ports) if either dies. :meth:`DurableBroker.stop` (a clean shutdown) stops both.

Tansu's fetch lists every record batch of a partition, so the service keeps the updates
partition short with :meth:`DurableBroker.truncate` behind its snapshots.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from .broker import free_port, tansu_binary, wait_listening
from .exceptions import BrokerError

__all__ = ["DurableBroker"]

log = logging.getLogger("csm.broker")
_BUCKET = "tansu"
_CLUSTER = "tansu_cluster"
_RUNFILE = "broker.json"


@dataclass(frozen=True, slots=True)
class _Proc:
    pid: int
    port: int


def _alive(pid: int, marker: str) -> bool:
    """``pid`` runs and its command line holds ``marker`` (not a recycled pid)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    if marker not in cmd:
        return False
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return False


def _kill_pair(store: _Proc, tansu: _Proc, objects: Path) -> None:
    for p, marker in ((tansu, f":{tansu.port}"), (store, str(objects))):
        if _alive(p.pid, marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(p.pid, os.WNOHANG)


def _listening(port: int) -> bool:
    import socket
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


class DurableBroker:
    """``DurableBroker(folder).start().bootstrap`` -> ``"127.0.0.1:PORT"``."""

    def __init__(self, root: Path, host: str = "127.0.0.1",
                 unsynced: str | None = f"^clusters/{_CLUSTER}/groups/") -> None:
        """``unsynced``: keys the object server writes without fsync (see
        ``ObjectStore``); the default, Tansu's consumer-group records, is safe."""
        self.root, self.host, self.unsynced = root, host, unsynced
        self.objects = root / "objects"
        self.store: _Proc | None = None
        self.tansu: _Proc | None = None
        self.reattached = False
        self._stopping = threading.Event()
        self._watch: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        assert self.tansu is not None
        return f"{self.host}:{self.tansu.port}"

    @property
    def endpoint(self) -> str:
        assert self.store is not None
        return f"http://{self.host}:{self.store.port}"

    # -- lifecycle ---------------------------------------------------------------------
    def start(self, timeout: float = 20.0) -> DurableBroker:
        self.root.mkdir(parents=True, exist_ok=True)
        found = self._read_runfile()
        if found is not None:
            store, tansu = found
            if (_alive(store.pid, str(self.objects)) and _alive(tansu.pid, f":{tansu.port}")
                    and _listening(store.port) and _listening(tansu.port)):
                self.store, self.tansu, self.reattached = store, tansu, True
                log.info("reattached to the broker started earlier (pids %d, %d)",
                         tansu.pid, store.pid)
            else:
                _kill_pair(store, tansu, self.objects)   # half of a pair: both afresh
        if self.store is None:
            try:
                self._spawn(timeout)
            except BrokerError:
                self.stop()
                raise
        self._watch = threading.Thread(target=self._watchdog, daemon=True,
                                       name="csm-broker-watch")
        self._watch.start()
        return self

    def _watchdog(self, every: float = 0.5) -> None:
        """While the service runs: if either process dies, start both again on the same
        files and ports (the Kafka clients reconnect to the address they know)."""
        while not self._stopping.wait(every):
            store, tansu = self.store, self.tansu
            if store is None or tansu is None:
                return
            if _alive(store.pid, str(self.objects)) and _alive(tansu.pid, f":{tansu.port}"):
                continue
            log.warning("the embedded broker's processes stopped (pids %d, %d); starting "
                        "them again on the same files and ports", tansu.pid, store.pid)
            _kill_pair(store, tansu, self.objects)
            try:
                self._spawn(20.0, (store.port, tansu.port))
            except BrokerError:
                log.exception("restarting the embedded broker failed; trying again")
                if self.store is not None and self.tansu is not None:
                    _kill_pair(self.store, self.tansu, self.objects)
                self.store, self.tansu = store, tansu   # dead pids: the next turn retries

    def _spawn(self, timeout: float, ports: tuple[int, int] | None = None) -> None:
        logf = (self.root / "broker.log").open("ab")
        sport, kport = ports or (free_port(self.host), free_port(self.host))
        store = subprocess.Popen(
            [sys.executable, "-m", "streams.objstore", "--root", str(self.objects),
             "--host", self.host, "--port", str(sport),
             "--log-level", os.environ.get("CSM_OBJSTORE_LOG_LEVEL", "warning"),
             # group records (committed offsets): losing one to a power cut only means a
             # longer replay, which publishes nothing twice (service.runtime)
             *(["--unsynced", self.unsynced] if self.unsynced else [])],
            cwd=Path(__file__).resolve().parents[1], stdin=subprocess.DEVNULL,
            stdout=logf, stderr=logf, start_new_session=True)
        self.store = _Proc(store.pid, sport)
        try:
            wait_listening(store, self.host, sport, timeout, "the object server")
            url = f"tcp://{self.host}:{kport}"
            env = {**os.environ, "AWS_ACCESS_KEY_ID": "csm", "AWS_SECRET_ACCESS_KEY": "csm",
                   "AWS_DEFAULT_REGION": "auto", "AWS_ENDPOINT": self.endpoint,
                   "AWS_ALLOW_HTTP": "true"}
            tansu = subprocess.Popen(
                [str(tansu_binary()), "broker", "--listener-url", url,
                 "--advertised-listener-url", url, "--storage-engine", f"s3://{_BUCKET}/"],
                env=env, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                start_new_session=True)
            self.tansu = _Proc(tansu.pid, kport)
            wait_listening(tansu, self.host, kport, timeout, "the embedded broker")
        finally:
            logf.close()
        self._write_runfile()
        log.info("started the durable embedded broker on %s (objects in %s)", self.bootstrap,
                 self.objects)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop both processes (Tansu first: nothing is acknowledged after its store)."""
        self._stopping.set()
        if self._watch is not None and self._watch is not threading.current_thread():
            self._watch.join(30)
        for p, marker in ((self.tansu, None), (self.store, str(self.objects))):
            if p is None:
                continue
            mark = marker if marker is not None else f":{p.port}"
            with contextlib.suppress(ProcessLookupError):
                if _alive(p.pid, mark):
                    os.kill(p.pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while _alive(p.pid, mark) and time.monotonic() < deadline:
                with contextlib.suppress(ChildProcessError):
                    if os.waitpid(p.pid, os.WNOHANG)[0]:
                        break
                time.sleep(0.01)
            with contextlib.suppress(ProcessLookupError):
                if _alive(p.pid, mark):
                    os.kill(p.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(p.pid, 0)
        self.store = self.tansu = None
        with contextlib.suppress(FileNotFoundError):
            (self.root / _RUNFILE).unlink()

    def __enter__(self) -> DurableBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the run file ------------------------------------------------------------------
    def _read_runfile(self) -> tuple[_Proc, _Proc] | None:
        try:
            d = json.loads((self.root / _RUNFILE).read_text())
            return _Proc(**d["objstore"]), _Proc(**d["tansu"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _write_runfile(self) -> None:
        assert self.store is not None and self.tansu is not None
        body = json.dumps({"objstore": {"pid": self.store.pid, "port": self.store.port},
                           "tansu": {"pid": self.tansu.pid, "port": self.tansu.port}})
        tmp = self.root / (_RUNFILE + ".tmp")
        tmp.write_text(body)
        os.replace(tmp, self.root / _RUNFILE)

    # -- truncation --------------------------------------------------------------------
    def truncate(self, topic: str, partition: int, before: int) -> int:
        """Delete the record batches of ``topic``/``partition`` that hold only offsets
        below ``before``; return how many. Safe only behind a snapshot."""
        prefix = (f"clusters/{_CLUSTER}/topics/{topic}/partitions/{partition:010d}/"
                  "records/")
        with httpx.Client(base_url=self.endpoint, timeout=30) as c:
            r = c.get(f"/{_BUCKET}", params={"list-type": "2", "prefix": prefix})
            r.raise_for_status()
            bases = sorted(int(m) for m in re.findall(
                r"<Key>" + re.escape(prefix) + r"(\d+)\.batch</Key>", r.text))
            keep = [b for b in bases if b <= before]
            cut = keep[-1] if keep else -1        # this batch may still hold `before`
            gone = [b for b in bases if b < cut]
            for b in gone:
                c.delete(f"/{_BUCKET}/{prefix}{b:020d}.batch").raise_for_status()
        return len(gone)
