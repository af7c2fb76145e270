"""How fleet finds the backend: ``switchyard.fleet.backend_from_url`` itself, and fleet's own
``fleet.core.backend.backend_from_url`` through the ``fleet.backends`` entry points the
installed package registers."""

from __future__ import annotations

import asyncio
import importlib.metadata
from pathlib import Path

import fleet.core.backend
import pytest
import switchyard
from fleet.core.backend import Backend
from switchyard.fleet import SwitchyardBackend, backend_from_url, native_url
from sy_fleet_helpers import installed_entry_point_names, our_entry_point_names


@pytest.mark.parametrize(
    ("url", "native"),
    [
        ("switchyard+redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("SWITCHYARD+Redis://h:1/2", "redis://h:1/2"),
        ("switchyard+rediss://h:6380/0", "rediss://h:6380/0"),
        ("switchyard+redis-cluster://a:7000,b:7001", "redis-cluster://a:7000,b:7001"),
        ("switchyard+sqlite:///tmp/f.db", "sqlite:///tmp/f.db"),
        ("switchyard+sqlite:relative.db", "sqlite:relative.db"),
        ("switchyard+postgres://u@h/db?schema=s", "postgres://u@h/db?schema=s"),
        ("switchyard+postgresql://u@h/db", "postgresql://u@h/db"),
        ("switchyard+memory://", "memory://"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    ],
)
def test_factory_strips_the_scheme_prefix(url: str, native: str) -> None:
    assert native_url(url) == native
    backend = backend_from_url(url)
    assert isinstance(backend, SwitchyardBackend)
    assert isinstance(backend, Backend)


@pytest.mark.parametrize(
    "url",
    ["switchyard+mysql://u:secret@h/db", "switchyard+", "nothing", "switchyard+file:///x", "http://x", ""],
)
def test_a_bad_url_says_which_schemes_exist(url: str) -> None:
    with pytest.raises(ValueError) as info:
        backend_from_url(url)
    message = str(info.value)
    assert "switchyard+redis://" in message and "switchyard+sqlite:///" in message
    assert "switchyard+postgres://" in message and "switchyard+memory://" in message
    assert "secret" not in message  # the URL (and its password) is not repeated


async def test_a_bad_url_past_the_scheme_fails_on_first_use_as_value_error() -> None:
    backend = backend_from_url("switchyard+postgres://u@h/db?schema=Not-A-Schema")
    with pytest.raises(ValueError) as info:
        await backend.kv_get("ns", "k")
    assert isinstance(info.value, switchyard.ConfigError)


async def test_construction_does_no_io_and_one_open_is_shared(tmp_path: Path) -> None:
    backend = backend_from_url(f"switchyard+sqlite://{tmp_path / 'lazy.db'}")
    assert not (tmp_path / "lazy.db").exists()
    natives = await asyncio.gather(*(backend.native() for _ in range(10)))
    assert len({id(n) for n in natives}) == 1
    assert natives[0].backend == "sqlite"
    await backend.kv_set("ns", "k", b"v", None)
    assert await backend.kv_get("ns", "k") == b"v"
    await backend.aclose()
    with pytest.raises(switchyard.ClosedError):
        await backend.kv_get("ns", "k")
    await backend.aclose()  # twice is fine


async def test_native_errors_pass_through(tmp_path: Path) -> None:
    backend = backend_from_url(f"switchyard+sqlite://{tmp_path / 'e.db'}")
    try:
        with pytest.raises(switchyard.InvalidInputError):
            await backend.kv_set("", "k", b"v", None)  # empty names are refused
    finally:
        await backend.aclose()


def test_fleets_backend_from_url_finds_the_installed_entry_points(tmp_path: Path) -> None:
    """Entry points exist once the package is installed (``maturin develop``, ``pip install``):
    this fails, never skips, until it is."""
    wanted = our_entry_point_names()
    missing = wanted - installed_entry_point_names()
    if missing:
        pytest.fail(
            f"the fleet.backends entry points {sorted(missing)} are not installed: install the package into this "
            "interpreter (`maturin develop` or `pip install -e .` in clients/python) and run again",
            pytrace=False,
        )
    for ep in importlib.metadata.entry_points(group="fleet.backends"):
        if ep.name in wanted:
            assert ep.load() is backend_from_url
    for url in (
        "switchyard+redis://127.0.0.1:6379/0",
        f"switchyard+sqlite://{tmp_path / 'ep.db'}",
        "switchyard+postgres://u@h/db",
        "switchyard+memory://",
    ):
        backend = fleet.core.backend.backend_from_url(url)
        assert isinstance(backend, SwitchyardBackend), url
        assert isinstance(backend, Backend)


async def test_fleets_backend_from_url_gives_a_working_backend(redis_url: str) -> None:
    wanted = our_entry_point_names()
    if not wanted <= installed_entry_point_names():
        pytest.fail("the fleet.backends entry points are not installed: run `maturin develop`", pytrace=False)
    backend = fleet.core.backend.backend_from_url("switchyard+" + redis_url)
    try:
        await backend.counter_incr("entry-point-check", 1)
        assert await backend.counter_get("entry-point-check") >= 1
    finally:
        await backend.aclose()  # type: ignore[attr-defined]
