"""Real gateways for the client's tests: ``switchyard serve`` on free ports, on the embedded
default (one SQLite file in a temporary directory, the memory stream bridge) or on the session's
private Redis (each gateway under key prefixes of its own). Nothing is mocked.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from gateway_support import Gateway, GatewayFactory, embedded_args, redis_args, start_gateway
from switchyard.gateway import Client


@pytest.fixture
def start(switchyard_bin: str, tmp_path: Path) -> Iterator[GatewayFactory]:
    """Starts gateways (``start(*args, listen=…)``) in this test's temporary directory; stops them
    all at the end of the test."""
    started: list[Gateway] = []

    def factory(*args: str, listen: str = "127.0.0.1:0") -> Gateway:
        gateway = start_gateway(switchyard_bin, tmp_path, args, listen)
        started.append(gateway)
        return gateway

    yield factory
    # All at once: a gateway on Redis that served a stream takes a few seconds to exit.
    for gateway in started:
        gateway.terminate()
    for gateway in started:
        gateway.stop()


@pytest.fixture
def embedded(start: GatewayFactory, tmp_path: Path) -> Gateway:
    """A gateway on the embedded default."""
    return start(*embedded_args(tmp_path))


@pytest.fixture
async def client(embedded: Gateway) -> AsyncIterator[Client]:
    """A client of :func:`embedded`."""
    async with Client(embedded.url) as c:
        yield c


@pytest.fixture(params=["embedded", "redis"])
def backend_gateway(request: pytest.FixtureRequest, start: GatewayFactory, tmp_path: Path, unique: str) -> Gateway:
    """A gateway on the embedded default, then one on Redis."""
    if request.param == "embedded":
        return start(*embedded_args(tmp_path))
    redis_url: str = request.getfixturevalue("redis_url")
    return start(*redis_args(redis_url, unique))
