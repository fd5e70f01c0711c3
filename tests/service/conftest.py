from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _support import Running, settings_for, start

from streams.broker import EmbeddedBroker


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    """One real Kafka-protocol broker (Tansu) on a free loopback port for the session."""
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture
def service(broker: EmbeddedBroker) -> Iterator[Callable[..., Running]]:
    """Start services on their own topics; every one still running is stopped after."""
    started: list[Running] = []

    def make(**kw: Any) -> Running:
        r = start(settings_for(broker.bootstrap, **kw))
        started.append(r)
        return r

    yield make
    for r in started:
        r.stop()
