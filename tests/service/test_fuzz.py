"""Property-based fuzz of the API from its own OpenAPI schema: no answer is a 5xx."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from _support import Running, settings_for, start
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.app import create_app
from service.settings import Settings
from streams.broker import EmbeddedBroker

pytestmark = pytest.mark.kafka

SPEC = create_app(Settings()).openapi()     # no lifespan runs: the schema only
SCHEMA = schemathesis.openapi.from_dict(SPEC)
OPERATIONS = [(path, method.upper()) for path, ops in SPEC["paths"].items() for method in ops]


@pytest.fixture(scope="module")
def fuzzed(broker: EmbeddedBroker) -> Iterator[Running]:
    r = start(settings_for(broker.bootstrap, max_batch_updates=500, max_body_bytes=1 << 20))
    yield r
    r.stop()


@pytest.mark.parametrize(("path", "method"), OPERATIONS,
                         ids=[f"{m} {p}" for p, m in OPERATIONS])
def test_no_server_errors(fuzzed: Running, path: str, method: str) -> None:
    op = SCHEMA[path][method]

    @given(case=op.as_strategy(), data=st.data())
    @settings(max_examples=30, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def run(case: schemathesis.Case, data: st.DataObject) -> None:
        response = case.call(base_url=fuzzed.url, timeout=30)
        assert response.status_code < 500, (method, path, case.body, response.text)

    run()
