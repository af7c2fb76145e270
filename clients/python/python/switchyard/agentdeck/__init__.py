"""agentdeck's event stores, rebuilt on switchyard: drop-ins for
``agentdeck.adapters.stores.{redis,sqlite,postgres}``.

Each class subclasses agentdeck's own ``EventStorePort``, takes the seed store's constructor
arguments and returns agentdeck's own ``Event``, ``SessionClaim`` and ``RunSummary`` objects, so
swapping the import is the whole migration::

    # from agentdeck.adapters.stores.redis import RedisEventStore
    from switchyard.agentdeck import RedisEventStore

    store = RedisEventStore("redis://localhost:6379/0")

The data stays where and how agentdeck keeps it: the same Redis keys under the same prefix, the
same SQLite table, agentdeck's PostgreSQL schema, the same JSON bytes. A Python agentdeck service
and this store can share one database while they run. What changes is what happens under
contention: every write is one indivisible step on the server (a Lua script, one transaction), so
hundreds of concurrent appenders to one run all succeed with dense seqs where the seed's
optimistic retries give up.

Errors are agentdeck's: bad input raises ``ValueError`` (our ``InvalidInputError`` is one), a
store that fails raises ``agentdeck.errors.StoreError`` with our message and our exception as its
``__cause__``. Losing a claim is data, as the port says.

Needs the ``agentdeck`` extra: ``pip install "switchyard-py[agentdeck]"``.
"""

from __future__ import annotations

import asyncio
import warnings
from dataclasses import dataclass
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

try:
    from agentdeck.core.events import Event
    from agentdeck.core.ports import EventStorePort, RunSummary, SessionClaim
    from agentdeck.core.status import RunStatus
    from agentdeck.errors import StoreError
except ImportError as exc:  # pragma: no cover - the message is the test
    raise ImportError(
        "switchyard.agentdeck needs agentdeck-sdk 3.1 or newer: pip install 'switchyard-py[agentdeck]'"
    ) from exc

from switchyard import _native
from switchyard.errors import SwitchyardError

if TYPE_CHECKING:
    from agentdeck.core.context import RunContext
    from agentdeck.core.events import KnownPayload, RunResumed, RunStarted

__all__ = ["Claimed", "PostgresEventStore", "RedisEventStore", "SqliteEventStore", "Turn"]


@dataclass(frozen=True)
class Claimed:
    """What :meth:`RedisEventStore.claim` (and the others') did: ``outcome`` is ``started``
    (``event`` is the run's ``run.started``), ``held`` (``held_by`` names the open run) or
    ``queued`` (``position`` is its place in the session's line, 1 for the next)."""

    outcome: str
    event: Event | None = None
    held_by: str | None = None
    position: int | None = None
    overridden: tuple[Event, ...] = ()
    ended: tuple[Event, ...] = ()


@dataclass(frozen=True)
class Turn:
    """Where an enqueued run stands: ``state`` is ``waiting`` (with ``position``), ``started``
    (with ``event``) or ``not_waiting``."""

    state: str
    position: int | None = None
    event: Event | None = None


def _session_of(log_key: str, run_id: str) -> str | None:
    """The session that makes ``log_key`` the run's log: none when the run is its own log."""
    return None if log_key == run_id else log_key


def _same_log(log_key: str, ctx: RunContext) -> None:
    # The envelope's session comes from ctx, so a log_key naming another log would file the run's
    # events where its own envelope says they are not. agentdeck's callers always pass
    # ctx.log_key; anything else is a bug the seed stores would silently write.
    if log_key != ctx.log_key:
        raise ValueError(
            f"log_key {log_key!r} is not the log of this run's context ({ctx.log_key!r}): "
            "pass ctx.log_key, the session id or, without a session, the run id"
        )


class _SwitchyardEventStore(EventStorePort):
    """The port over ``switchyard._native.EventStore``, opened on first use."""

    def __init__(self, url: str, *, prefix: str | None = None) -> None:
        self._url = url
        self._prefix = prefix
        self._native: _native.EventStore | None = None
        self._opening = asyncio.Lock()
        self._closed = False

    async def _store(self) -> _native.EventStore:
        if self._native is not None:
            return self._native
        if self._closed:
            raise StoreError("the event log is closed; create a new store")
        async with self._opening:
            if self._native is None:
                try:
                    self._native = await _native.open_event_store(self._url, prefix=self._prefix)
                except ValueError:
                    raise
                except SwitchyardError as exc:
                    raise StoreError(f"opening the event log failed: {exc}") from exc
            return self._native

    async def _call(self, op: str, work: Callable[[_native.EventStore], Any]) -> Any:
        store = await self._store()
        try:
            return await work(store)
        except ValueError:
            # InvalidInputError and ConfigError are ValueErrors: agentdeck's stores raise that
            # for bad input too.
            raise
        except SwitchyardError as exc:
            raise StoreError(f"event log {op} failed: {exc}") from exc

    async def append(self, log_key: str, payloads: Sequence[KnownPayload], ctx: RunContext, origin: str) -> list[Event]:
        _same_log(log_key, ctx)
        texts = [payload.model_dump_json() for payload in payloads]
        rows: list[str] = await self._call(
            "append", lambda s: s.append(ctx.namespace, ctx.session_id, ctx.run_id, texts, origin)
        )
        return [Event.model_validate_json(row) for row in rows]

    async def read(self, log_key: str, ctx: RunContext, offset: int = 0, limit: int | None = None) -> list[Event]:
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be None or >= 0, got {limit}")
        rows: list[str] = await self._call(
            "read",
            lambda s: s.read(ctx.namespace, _session_of(log_key, ctx.run_id), ctx.run_id, max(offset, 0), limit),
        )
        return [Event.model_validate_json(row) for row in rows]

    async def read_run(self, log_key: str, run_id: str, ctx: RunContext, from_seq: int = 0) -> list[Event]:
        rows: list[str] = await self._call(
            "read_run", lambda s: s.read_run(ctx.namespace, _session_of(log_key, run_id), run_id, from_seq)
        )
        return [Event.model_validate_json(row) for row in rows]

    async def claim_start(
        self, log_key: str, opening: RunStarted, ctx: RunContext, origin: str, stale_after: timedelta
    ) -> tuple[SessionClaim, Event | None]:
        _same_log(log_key, ctx)
        held_by, overridden, event = await self._call(
            "claim_start",
            lambda s: s.claim_start(
                ctx.namespace,
                ctx.session_id,
                ctx.run_id,
                opening.model_dump_json(),
                origin,
                stale_after.total_seconds(),
            ),
        )
        claim = SessionClaim(
            held_by=held_by, overridden=tuple(Event.model_validate_json(row) for row in overridden)
        )
        return claim, (Event.model_validate_json(event) if event is not None else None)

    async def claim_resume(
        self, log_key: str, run_id: str, resumed: RunResumed, ctx: RunContext, origin: str
    ) -> Event | None:
        if ctx.run_id != run_id:
            raise ValueError(f"a claim on run {run_id!r} cannot be made in the context of {ctx.run_id!r}")
        _same_log(log_key, ctx)
        event: str | None = await self._call(
            "claim_resume",
            lambda s: s.claim_resume(ctx.namespace, ctx.session_id, run_id, resumed.model_dump_json(), origin),
        )
        return Event.model_validate_json(event) if event is not None else None

    async def list_runs(self, ctx: RunContext, status: RunStatus | None = None) -> list[RunSummary]:
        rows: list[tuple[str, str, str]] = await self._call(
            "list_runs", lambda s: s.list_runs(ctx.namespace, None if status is None else RunStatus(status).value)
        )
        return [RunSummary(log_key=log_key, run_id=run_id, status=RunStatus(value)) for log_key, run_id, value in rows]

    async def run_status(self, log_key: str, run_id: str, ctx: RunContext) -> RunStatus:
        value: str = await self._call(
            "run_status", lambda s: s.run_status(ctx.namespace, _session_of(log_key, run_id), run_id)
        )
        return RunStatus(value)

    # --- beyond agentdeck's port: a second message to a busy session (ADR 0394) ---------------

    async def claim(
        self,
        log_key: str,
        opening: RunStarted,
        ctx: RunContext,
        origin: str,
        stale_after: timedelta,
        *,
        strategy: str = "reject",
    ) -> Claimed:
        """``claim_start`` with a multitask strategy: ``reject`` (``claim_start`` itself),
        ``enqueue`` (on a busy session the run waits in the session's line and starts exactly
        once, in claim order, when the run before it ends: ``outcome == "queued"`` with its
        ``position``), ``interrupt`` or ``rollback`` (the open run ends ``run.cancelled``, listed
        in ``ended``, before this one starts). A waiting run has no event: agentdeck's own stores
        sharing the log see the session free."""
        _same_log(log_key, ctx)
        outcome, held_by, position, event, overridden, ended = await self._call(
            "claim",
            lambda s: s.claim(
                ctx.namespace,
                ctx.session_id,
                ctx.run_id,
                opening.model_dump_json(),
                origin,
                stale_after.total_seconds(),
                strategy,
            ),
        )
        return Claimed(
            outcome=outcome,
            event=Event.model_validate_json(event) if event is not None else None,
            held_by=held_by,
            position=position,
            overridden=tuple(Event.model_validate_json(row) for row in overridden),
            ended=tuple(Event.model_validate_json(row) for row in ended),
        )

    async def turn(self, ctx: RunContext) -> Turn:
        """Where an enqueued run stands, after starting the next waiting run if its session is
        free (call it while the run waits: it moves the line when the run before ended without
        a hand-off)."""
        state, position, event = await self._call(
            "turn", lambda s: s.turn(ctx.namespace, ctx.session_id, ctx.run_id)
        )
        return Turn(
            state=state,
            position=position,
            event=Event.model_validate_json(event) if event is not None else None,
        )

    async def hand_off(self, log_key: str, ctx: RunContext) -> Event | None:
        """Starts the session's next waiting run if no fresh open run holds it; its
        ``run.started``. Call it after ending a run of a session that may have waiting runs."""
        _same_log(log_key, ctx)
        if ctx.session_id is None:
            return None
        event: str | None = await self._call("hand_off", lambda s: s.hand_off(ctx.namespace, ctx.session_id))
        return Event.model_validate_json(event) if event is not None else None

    async def leave_line(self, ctx: RunContext) -> bool:
        """Takes the run of ``ctx`` out of its session's line before it starts."""
        if ctx.session_id is None:
            return False
        left: bool = await self._call(
            "leave_line", lambda s: s.leave_line(ctx.namespace, ctx.session_id, ctx.run_id)
        )
        return left

    async def aclose(self) -> None:
        """Closes the store; later calls raise ``StoreError``."""
        self._closed = True
        if self._native is not None:
            self._native.close()
            self._native = None

    def close(self) -> None:
        """``aclose`` for callers without an event loop (agentdeck's SQLite store closes this way)."""
        self._closed = True
        if self._native is not None:
            self._native.close()
            self._native = None


class RedisEventStore(_SwitchyardEventStore):
    """agentdeck's Redis event log (same keys, same prefix, same JSON), written by one Lua script
    per call on the server.

    ``clock`` is accepted for signature compatibility and not used: events are stamped with the
    server's clock (Redis ``TIME``) in the same step that writes them, which is what keeps one
    store clock across every process sharing the log.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "agentdeck:events",
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if clock is not None:
            warnings.warn(
                "switchyard's RedisEventStore stamps events with the Redis server's clock; the clock argument is ignored",
                stacklevel=2,
            )
        super().__init__(url, prefix=prefix)


class SqliteEventStore(_SwitchyardEventStore):
    """agentdeck's SQLite event log (the same table in the same file). ``":memory:"`` (the seed's
    default) is a private in-process store, as the seed's is.

    Share a file with agentdeck's own ``SqliteEventStore`` across processes, not inside one: this
    store carries its own copy of SQLite, and two copies of SQLite in one process do not see each
    other's file locks (SQLite's own warning; measured here: a resume granted twice). Within one
    process, use one of the two.
    """

    def __init__(self, db_path: str | Path = ":memory:") -> None:
        path = str(db_path)
        super().__init__("memory://" if path == ":memory:" else f"sqlite://{path}")


class PostgresEventStore(_SwitchyardEventStore):
    """agentdeck's PostgreSQL event log: its schema (``agentdeck_events`` by default), its table
    and its advisory locks, so claims from agentdeck's own store and this one exclude each
    other. ``dsn`` is a ``postgresql://`` URL (libpq's ``key=value`` form is not read)."""

    def __init__(self, dsn: str, *, schema: str = "agentdeck_events") -> None:
        parts = urlsplit(dsn)
        if parts.scheme.lower() not in ("postgres", "postgresql"):
            raise ValueError(
                f"PostgresEventStore needs a postgresql:// URL (got a {'key=value DSN' if '=' in dsn else 'non-URL'}): "
                "write it as postgresql://USER:PASSWORD@HOST:PORT/DATABASE"
            )
        query = [(k, v) for k, v in parse_qsl(parts.query) if k != "schema"] + [("schema", schema)]
        super().__init__(urlunsplit(parts._replace(query=urlencode(query))))
