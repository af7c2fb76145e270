"""Helpers shared by the fleet backend tests (a module of its own: ``conftest`` is not importable
by name when several test directories have one)."""

from __future__ import annotations

import importlib.metadata
import os
import tomllib
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import redis
import redis.asyncio as aioredis

PACKAGE_ROOT = Path(__file__).resolve().parents[2]

# Redis databases, one per use, so global keys (the catalog, the worker index) never mix; each
# pytest-xdist worker takes its own four (gw0: 1-4, gw1: 5-8, ...), as the tests flush them.
_BASE = 1 + 4 * int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
DB_FLEET_REFERENCE = _BASE
DB_OURS = _BASE + 1
DB_INTEROP = _BASE + 2
DB_MASTER = _BASE + 3


def redis_db_url(redis_url: str, db: int) -> str:
    """``redis_url`` pointing at database ``db``."""
    parts = urlsplit(redis_url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{db}", parts.query, parts.fragment))


async def flush_db(url: str) -> None:
    client = aioredis.from_url(url)
    try:
        await client.flushdb()
    finally:
        await client.aclose()


def flush_db_now(url: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


def our_entry_point_names() -> set[str]:
    """The ``fleet.backends`` names ``pyproject.toml`` registers for this package."""
    with open(PACKAGE_ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    return set(project["entry-points"]["fleet.backends"])


def installed_entry_point_names() -> set[str]:
    return {
        ep.name
        for ep in importlib.metadata.entry_points(group="fleet.backends")
        if ep.value == "switchyard.fleet:backend_from_url"
    }
