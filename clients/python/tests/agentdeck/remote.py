"""agentdeck's own SqliteEventStore in a process of its own.

Two copies of the SQLite library in one process do not see each other's file locks (POSIX locks
belong to the process, and each copy keeps its own table of them: SQLite's "how to corrupt"
page, section 2.2.1). Python's ``sqlite3`` is one copy and our extension carries another, so a
test that shares one file between agentdeck's store and ours runs agentdeck's in a child
process, as two services sharing a file would.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from agentdeck.core.ports import EventStorePort

_stores: dict[str, Any] = {}
_loop: asyncio.AbstractEventLoop | None = None


def _call(path: str, method: str, args: tuple[Any, ...]) -> Any:
    """In the child: the store of ``path`` (made on first use) runs ``method``."""
    global _loop
    from agentdeck.adapters.stores.sqlite import SqliteEventStore

    if _loop is None:
        _loop = asyncio.new_event_loop()
    store = _stores.get(path)
    if store is None:
        store = _stores[path] = SqliteEventStore(path)
    if method == "close":
        store.close()
        del _stores[path]
        return None
    return _loop.run_until_complete(getattr(store, method)(*args))


class RemoteSqliteEventStore(EventStorePort):
    """agentdeck's ``SqliteEventStore(path)``, run in a child process; the same port."""

    def __init__(self, path: str) -> None:
        self._path = str(path)
        self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))

    async def _run(self, method: str, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, _call, self._path, method, args)

    async def append(self, log_key, payloads, ctx, origin):  # type: ignore[no-untyped-def]
        return await self._run("append", log_key, list(payloads), ctx, origin)

    async def read(self, log_key, ctx, offset=0, limit=None):  # type: ignore[no-untyped-def]
        return await self._run("read", log_key, ctx, offset, limit)

    async def read_run(self, log_key, run_id, ctx, from_seq=0):  # type: ignore[no-untyped-def]
        return await self._run("read_run", log_key, run_id, ctx, from_seq)

    async def claim_start(self, log_key, opening, ctx, origin, stale_after):  # type: ignore[no-untyped-def]
        return await self._run("claim_start", log_key, opening, ctx, origin, stale_after)

    async def claim_resume(self, log_key, run_id, resumed, ctx, origin):  # type: ignore[no-untyped-def]
        return await self._run("claim_resume", log_key, run_id, resumed, ctx, origin)

    async def list_runs(self, ctx, status=None):  # type: ignore[no-untyped-def]
        return await self._run("list_runs", ctx, status)

    async def run_status(self, log_key, run_id, ctx):  # type: ignore[no-untyped-def]
        return await self._run("run_status", log_key, run_id, ctx)

    async def aclose(self) -> None:
        await self._run("close")
        self._pool.shutdown()
