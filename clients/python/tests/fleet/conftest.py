"""Fixtures of the fleet-framework backend tests: the backend URLs (each test gets its own
Redis database, SQLite file or PostgreSQL schema) and fleet's own backends to compare against."""

from __future__ import annotations

import importlib
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from fleet.core.backend import RedisBackend
from fleet.core.memory_backend import InMemoryBackend
from switchyard.fleet import SwitchyardBackend
from sy_fleet_helpers import (
    DB_FLEET_REFERENCE,
    DB_OURS,
    flush_db,
    flush_db_now,
    installed_entry_point_names,
    our_entry_point_names,
    redis_db_url,
)


@pytest.fixture
def fleet_entry_points(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Makes fleet's ``backend_from_url`` find the ``switchyard+`` schemes: the installed entry
    points when the package is installed, else (for the master/worker tests, which are about
    fleet running on the backend, not about installation) a dist-info on ``sys.path`` for the
    test's duration with the entry points ``pyproject.toml`` declares. The installation itself is
    checked by ``test_fleet_entry_points.py``, which never falls back."""
    wanted = our_entry_point_names()
    if wanted <= installed_entry_point_names():
        yield
        return
    site = tmp_path_factory.mktemp("entry-points")
    info = site / "switchyard_py_test_entry_points-0.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: switchyard-py-test-entry-points\nVersion: 0.0.0\n")
    lines = ["[fleet.backends]"] + [f"{name} = switchyard.fleet:backend_from_url" for name in sorted(wanted)]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    assert wanted <= installed_entry_point_names()
    yield
    monkeypatch.undo()
    importlib.invalidate_caches()
    sys.path_importer_cache.pop(str(site), None)


@pytest.fixture(params=["redis", "sqlite", "postgres"])
def our_url(request: pytest.FixtureRequest, tmp_path: Path, unique: str) -> str:
    """A ``switchyard+…`` URL with nothing in it: Redis database 2 (flushed), a new SQLite file,
    a new PostgreSQL schema."""
    kind = request.param
    if kind == "redis":
        url = redis_db_url(request.getfixturevalue("redis_url"), DB_OURS)
        flush_db_now(url)
        return "switchyard+" + url
    if kind == "sqlite":
        return f"switchyard+sqlite://{tmp_path / 'fleet.db'}"
    postgres_url = request.getfixturevalue("postgres_url")
    sep = "&" if "?" in postgres_url else "?"
    return f"switchyard+{postgres_url}{sep}schema=sy_{unique}"


@pytest.fixture
async def ours(our_url: str) -> AsyncIterator[SwitchyardBackend]:
    backend = SwitchyardBackend(our_url)
    try:
        yield backend
    finally:
        await backend.aclose()


@pytest.fixture(params=["fleet-redis", "fleet-memory"])
async def ref(request: pytest.FixtureRequest) -> AsyncIterator[RedisBackend | InMemoryBackend]:
    """fleet's own backend to compare with: ``RedisBackend`` on Redis database 1 (flushed) or
    ``InMemoryBackend``."""
    if request.param == "fleet-memory":
        yield InMemoryBackend()
        return
    url = redis_db_url(request.getfixturevalue("redis_url"), DB_FLEET_REFERENCE)
    await flush_db(url)
    backend = RedisBackend(url)
    try:
        yield backend
    finally:
        await backend.aclose()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """fleet's ``InMemoryBackend`` is compared with one of our backends (SQLite), its
    ``RedisBackend`` with all three: the in-memory reference repeats what the Redis one checks,
    and the suite runs inside ``cargo test``'s time."""
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec is not None else {}
        if params.get("ref") == "fleet-memory" and params.get("our_url", "sqlite") != "sqlite":
            dropped.append(item)
        else:
            keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
