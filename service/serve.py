"""Run the API and the runtime in this process under uvicorn (one worker: one engine)."""

from __future__ import annotations

import logging
import sys
import threading

import uvicorn

from .app import create_app
from .client import CsmClient
from .settings import Settings
from .state import StateDir

__all__ = ["ServerThread", "configure_logging", "serve"]


def configure_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)   # the log truncation's requests


def serve(settings: Settings, state: StateDir | None = None) -> None:
    configure_logging(settings.log_level)
    try:
        uvicorn.run(create_app(settings, state), host=settings.host, port=settings.port,
                    log_level=settings.log_level, access_log=False, workers=1)
    finally:
        if state is not None:
            state.close()


class ServerThread:
    """The service on a background thread of this process (the demo and the tests)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.server = uvicorn.Server(uvicorn.Config(
            create_app(settings), host=settings.host, port=settings.port,
            log_level=settings.log_level, access_log=False))
        self.thread = threading.Thread(target=self.server.run, daemon=True, name="csm-api")

    @property
    def url(self) -> str:
        return f"http://{self.settings.host}:{self.settings.port}"

    def client(self, token: str | None = None) -> CsmClient:
        return CsmClient(self.url, token=token)

    def start(self, timeout: float = 180.0) -> ServerThread:
        self.thread.start()
        with self.client() as c:
            c.wait_ready(timeout)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
