"""Run the API and the runtime in this process under uvicorn (one worker: one engine)."""

from __future__ import annotations

import logging
import sys

import uvicorn

from .app import create_app
from .settings import Settings

__all__ = ["configure_logging", "serve"]


def configure_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def serve(settings: Settings) -> None:
    configure_logging(settings.log_level)
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port,
                log_level=settings.log_level, access_log=False, workers=1)
