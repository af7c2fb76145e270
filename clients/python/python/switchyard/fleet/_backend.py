"""fleet-framework 0.1.0's ``Backend`` protocol over switchyard's native fleet backend."""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from switchyard import _native
from switchyard.errors import ClosedError
from switchyard.fleet._events import EventClient
from switchyard.fleet._url import native_url

try:
    from fleet.core.backend import RawItem
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("switchyard.fleet needs fleet-framework 0.1: pip install 'switchyard-py[fleet]'") from exc


#: A reservation or claim this object still remembers this long after it lapsed is forgotten:
#: the backend has swept it back long before (fleet's master sweeps every 10 s).
STALE_AFTER_SECONDS = 3600.0
_PRUNE_EVERY_SECONDS = 60.0


@dataclass
class _Held:
    """One reservation made through this object: what fleet's ``task_id`` stands for."""

    receipt: str
    body: bytes
    visible_until: float


def _fleet_task_key(body: bytes) -> str | None:
    """The id fleet's ``queue_reserve`` files a reservation under, derived as fleet does.

    ``str(envelope.get("id", ""))`` of a JSON object (so ``5`` is ``"5"``, ``null`` is ``"None"``,
    a missing or empty id is ``""``); ``None`` for a body that is not a JSON object, which fleet
    files under a random id nobody can ack.
    """
    try:
        envelope = json.loads(body.decode("utf-8"))
        return str(envelope.get("id", ""))
    except (ValueError, AttributeError, RecursionError):  # not UTF-8, not JSON, not an object
        return None


def _ttl(ttl_seconds: float | None) -> float | None:
    """fleet's TTL rule: ``None`` and ``<= 0`` mean no expiry."""
    return float(ttl_seconds) if ttl_seconds is not None and ttl_seconds > 0 else None


def _count(n: int) -> int:
    return max(0, int(n))


def _raw_item(item: _native.PoolItem) -> RawItem:
    return RawItem(
        id=item.id,
        payload=item.payload,
        tags=json.loads(item.tags),
        expires_at=item.expires_at,
        in_use_until=item.in_use_until,
    )


class SwitchyardBackend:
    """A fleet-framework ``Backend`` on switchyard: Redis (fleet's own key layout, so a fleet
    ``RedisBackend`` on the same Redis sees the same tasks, KV, pools, counters, streams and
    workers), SQLite, PostgreSQL or memory.

    Built synchronously from a URL like fleet's ``RedisBackend(url)``; the native backend opens on
    the first call (one open shared by concurrent first calls). ``aclose()`` closes it; later
    calls raise :class:`switchyard.ClosedError`.

    **Acks by task id.** fleet acks and nacks by task id; switchyard by the receipt of one
    delivery. This object remembers the receipt of every reservation it made, filed under the id
    fleet derives (``str(envelope.get("id", ""))``), so ``queue_ack``/``queue_nack`` work for
    reservations made through this object (how fleet's workers use a backend: the slot that
    reserved a task acks it). A task id this object did not reserve answers ``False`` and changes
    nothing. Bodies that are JSON objects without an id are filed under ``""`` (fleet's worker
    acks them as ``task.id == ""``); bodies that are not JSON objects under no id, so like fleet
    nobody can ack them by id. ``queue_dead`` of a task this object holds ends its reservation
    in the same step (see :meth:`queue_dead`). Pool claims alike: ``pool_release`` frees a claim
    ``pool_claim_any`` made through this object.

    Native errors (:class:`switchyard.SwitchyardError` and its subclasses) pass through.
    """

    def __init__(self, url: str, *, prefix: str | None = None) -> None:
        self._url = native_url(url)
        self._scheme = self._url.partition(":")[0]
        self._prefix = prefix
        self._native: _native.FleetBackend | None = None
        self._open_lock = asyncio.Lock()
        self._closed = False
        self._held: dict[str, dict[str | None, deque[_Held]]] = {}
        self._claims: dict[tuple[str, str], tuple[str, float]] = {}
        self._dead_lettered: dict[tuple[str, str], float] = {}
        self._last_prune = time.monotonic()
        self._r = EventClient(self.native)

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("open" if self._native is not None else "not opened yet")
        return f"<SwitchyardBackend {self._scheme}:// ({state})>"

    # --- lifecycle ---------------------------------------------------------------------------

    async def native(self) -> _native.FleetBackend:
        """The native ``switchyard.FleetBackend`` (opened on first use), for what fleet's protocol
        lacks: ``queue_stats``, ``queue_submit``, ``lock_extend``, ``dlq_requeue``…"""
        backend = self._native
        if backend is not None:
            return backend
        if self._closed:
            raise ClosedError("this switchyard fleet backend was closed by aclose(); build a new one")
        async with self._open_lock:
            if self._native is None:
                if self._closed:
                    raise ClosedError("this switchyard fleet backend was closed by aclose(); build a new one")
                opened = await _native.open_fleet_backend(self._url, prefix=self._prefix)
                if self._closed:  # aclose() ran while this open was under way
                    opened.close()
                    raise ClosedError("this switchyard fleet backend was closed by aclose(); build a new one")
                self._native = opened
            return self._native

    @property
    def r(self) -> EventClient:
        """What fleet's worker takes from ``RedisBackend.r`` for ``EventBus``: ``publish`` and
        ``pubsub`` on ``event:<topic>`` channels (not a Redis client; see :class:`EventClient`)."""
        return self._r

    async def aclose(self) -> None:
        """Closes the native backend; calls in flight finish, later calls raise ``ClosedError``.
        Receipts and claims this object remembered are forgotten (the backend keeps the
        reservations, which lapse and are swept back as after a crash)."""
        self._closed = True
        backend, self._native = self._native, None
        self._held.clear()
        self._claims.clear()
        self._dead_lettered.clear()
        if backend is not None:
            backend.close()

    # --- kv ----------------------------------------------------------------------------------

    async def kv_set(self, ns: str, key: str, value: bytes, ttl_seconds: int | None) -> None:
        await (await self.native()).kv_set(ns, key, value, _ttl(ttl_seconds))

    async def kv_setnx(self, ns: str, key: str, value: bytes, ttl_seconds: int | None) -> bool:
        return await (await self.native()).kv_set_nx(ns, key, value, _ttl(ttl_seconds))

    async def kv_get(self, ns: str, key: str) -> bytes | None:
        return await (await self.native()).kv_get(ns, key)

    async def kv_del(self, ns: str, key: str) -> bool:
        return await (await self.native()).kv_del(ns, key)

    # --- pools -------------------------------------------------------------------------------

    async def pool_put(
        self,
        name: str,
        item_id: str,
        payload: bytes,
        tags: dict[str, Any],
        ttl_seconds: int | None,
    ) -> None:
        await (await self.native()).pool_put(name, item_id, payload, json.dumps(tags), _ttl(ttl_seconds))

    async def pool_list(self, name: str) -> list[RawItem]:
        return [_raw_item(item) for item in await (await self.native()).pool_list(name)]

    async def pool_remove(self, name: str, item_id: str) -> bool:
        self._claims.pop((name, item_id), None)
        return await (await self.native()).pool_remove(name, item_id)

    async def pool_release(self, name: str, item_id: str) -> bool:
        """Frees the claim ``pool_claim_any`` made on the item through this object; ``False`` for
        an item this object holds no claim on (fleet's ``RedisBackend`` would free anyone's)."""
        claim = self._claims.pop((name, item_id), None)
        if claim is None:
            return False
        return await (await self.native()).pool_release(name, item_id, claim[0])

    async def pool_claim_any(
        self,
        name: str,
        where: dict[str, Any],
        hold_seconds: int,
    ) -> RawItem | None:
        """Claims one live item whose tags equal every ``where`` pair for ``hold_seconds``, the
        latest-expiring first, in one atomic step. ``in_use_until`` is the claim's end (as
        fleet's ``InMemoryBackend``; its ``RedisBackend`` returns the item as listed before the
        claim, with ``None``)."""
        claimed = await (await self.native()).pool_claim_any(name, json.dumps(where), float(hold_seconds))
        if claimed is None:
            return None
        item, token = claimed
        self._claims[(name, item.id)] = (token, item.in_use_until or 0.0)
        self._maybe_prune()
        return _raw_item(item)

    async def pool_size(self, name: str) -> int:
        return await (await self.native()).pool_size(name)

    # --- locks and counters ------------------------------------------------------------------

    async def lock_acquire(self, name: str, hold_seconds: int, wait_seconds: float) -> str | None:
        """The holder's token, or ``None`` after ``wait_seconds``. As in fleet, a hold under one
        second is one second. The grant's fence is dropped (``native().lock_acquire`` has it)."""
        grant = await (await self.native()).lock_acquire(name, max(1.0, float(hold_seconds)), max(0.0, wait_seconds))
        return None if grant is None else grant[0]

    async def lock_release(self, name: str, token: str) -> bool:
        return await (await self.native()).lock_release(name, token)

    async def counter_incr(self, name: str, by: int) -> int:
        return await (await self.native()).counter_incr(name, by)

    async def counter_get(self, name: str) -> int:
        return await (await self.native()).counter_get(name)

    async def counter_set(self, name: str, value: int) -> None:
        await (await self.native()).counter_set(name, value)

    async def counter_del(self, name: str) -> None:
        await (await self.native()).counter_del(name)

    # --- the job queue -----------------------------------------------------------------------

    async def queue_push(self, name: str, body: bytes, *, priority: int = 0) -> None:
        """Appends ``body`` to the tier of ``priority`` (``> 0`` high, ``0`` normal, ``< 0`` low).

        Unlike fleet, a body whose id the backend keeps a record of (a task pushed through
        switchyard that is waiting, running, or finished within the retention: 24 h / 1,000 by
        default) is refused with :class:`switchyard.AlreadyExistsError`; nothing is queued.
        """
        await (await self.native()).queue_push(name, body, priority)

    async def queue_size(self, name: str) -> int:
        return await (await self.native()).queue_size(name)

    async def queue_peek(self, name: str, n: int) -> list[bytes]:
        if n <= 0:
            return []
        return await (await self.native()).queue_peek(name, n)

    async def queue_reserve(self, name: str, timeout_seconds: float, visibility_seconds: int) -> bytes | None:
        """The next body (high, normal, low tier), waiting up to ``timeout_seconds``; reserved
        for ``visibility_seconds`` (at least 1, as in fleet). Its receipt is filed under fleet's
        task id for ``queue_ack``/``queue_nack`` (see the class docstring)."""
        delivery = await (await self.native()).queue_reserve(
            name, max(0.0, float(timeout_seconds)), max(1.0, float(visibility_seconds))
        )
        if delivery is None:
            return None
        body = delivery.body
        held = _Held(delivery.receipt, body, delivery.visible_until)
        self._held.setdefault(name, {}).setdefault(_fleet_task_key(body), deque()).append(held)
        self._maybe_prune()
        return body

    def _holds(self, name: str, key: str | None) -> deque[_Held] | None:
        by_key = self._held.get(name)
        return by_key.get(key) if by_key else None

    def _forget(self, name: str, key: str | None, held: _Held) -> None:
        by_key = self._held.get(name)
        holds = by_key.get(key) if by_key else None
        if holds is None or by_key is None:
            return
        try:
            holds.remove(held)
        except ValueError:
            return
        if not holds:
            del by_key[key]
            if not by_key:
                del self._held[name]

    async def _settle(self, name: str, task_id: Any, end: Callable[[str], Awaitable[bool]]) -> bool:
        """Ends a reservation of ``task_id`` made through this object with ``end(receipt)``.

        Newest first: when a task lapsed and was delivered to this object again, the newest
        receipt is the current one and the older ones answer ``False`` (they are forgotten as
        they are tried). ``False`` when no remembered receipt is current.
        """
        key = str(task_id)
        holds = self._holds(name, key)
        while holds:
            held = holds[-1]
            self._forget(name, key, held)
            if await end(held.receipt):
                return True
            holds = self._holds(name, key)
        return False

    async def queue_ack(self, name: str, task_id: str) -> bool:
        """Ends the reservation this object made of task ``task_id``; ``False`` if it holds none
        that is current (it made none, or the reservation lapsed and was delivered elsewhere)."""
        backend = await self.native()
        if self._dead_lettered.pop((name, str(task_id)), None) is not None:
            return True  # queue_dead just ended this reservation (a task out of retries)
        return await self._settle(name, task_id, lambda receipt: backend.queue_ack(name, receipt))

    async def queue_nack(self, name: str, task_id: str, body: bytes, *, delay_seconds: float) -> bool:
        """Ends the reservation this object made of ``task_id`` and requeues ``body`` (now, or
        after ``delay_seconds``) into the tier the task came from. ``False`` and nothing requeued
        when this object holds no current reservation of it (fleet's ``RedisBackend`` requeues
        ``body`` regardless, which duplicates a task whose reservation another worker holds)."""
        backend = await self.native()
        delay = max(0.0, float(delay_seconds))
        return await self._settle(name, task_id, lambda receipt: backend.queue_nack(name, receipt, body, delay))

    async def queue_sweep_expired(self, name: str, now: float | None = None) -> int:
        """Returns every lapsed reservation to its tier; how many. ``now`` is accepted and
        ignored: the backend judges lapses by its own clock (fleet's callers, the master's
        sweeper, never pass it)."""
        return await (await self.native()).queue_sweep_expired(name)

    async def queue_dead(self, name: str, body: bytes) -> None:
        """Appends ``body`` to the dead-letter queue; when this object holds a reservation of the
        task, that reservation ends in the same step (``queue_fail``), the two ways fleet's worker
        calls it:

        - a task out of retries: ``queue_dead(name, updated copy)`` then ``queue_ack(name, id)``.
          The reservation of the newest delivery of that id ends here, so the task ends *dead*
          (not completed) in switchyard's records and counts; the ``queue_ack`` that follows
          answers ``True``, as fleet's would.
        - a body it cannot parse: ``queue_dead(name, the very bytes)`` and no ack. The
          reservation of exactly these bytes ends here, so the task is not redelivered and
          dead-lettered again after every visibility timeout, as it is with fleet's own backends.
        """
        backend = await self.native()
        held = self._take_body(name, body)
        key = _fleet_task_key(body)
        if held is None and key is not None:
            holds = self._holds(name, key)
            if holds:
                held = holds[-1]
                self._forget(name, key, held)
                self._dead_lettered[(name, key)] = held.visible_until
        if held is not None and await backend.queue_fail(name, held.receipt, body):
            return
        if key is not None:
            self._dead_lettered.pop((name, key), None)
        await backend.queue_dead(name, body)

    def _take_body(self, name: str, body: bytes) -> _Held | None:
        """The newest reservation of exactly ``body`` made through this object, forgotten."""
        key = _fleet_task_key(body)
        for held in reversed(self._holds(name, key) or ()):
            if held.body == body:
                self._forget(name, key, held)
                return held
        return None

    async def dlq_peek(self, name: str, n: int) -> list[bytes]:
        return await (await self.native()).dlq_peek(name, _count(n))

    async def dlq_pop(self, name: str, n: int) -> list[bytes]:
        return await (await self.native()).dlq_pop(name, _count(n))

    async def dlq_length(self, name: str) -> int:
        return await (await self.native()).dlq_length(name)

    async def dlq_clear(self, name: str) -> int:
        return await (await self.native()).dlq_clear(name)

    # --- streams and events ------------------------------------------------------------------

    async def stream_push(
        self,
        name: str,
        envelope: bytes,
        *,
        score: float,
        max_len: int,
        ttl_seconds: int,
    ) -> None:
        """Inserts ``envelope`` at ``score``; drops entries scored before ``score - ttl_seconds``
        and the lowest beyond ``max_len`` (``<= 0``: no limit, as in fleet); publishes the score
        on topic ``<name>.emit``."""
        await (await self.native()).stream_push(name, envelope, float(score), _count(max_len), _ttl(ttl_seconds))

    async def stream_pop(self, name: str, n: int) -> list[bytes]:
        return await (await self.native()).stream_pop(name, _count(n))

    async def stream_peek(self, name: str, n: int) -> list[bytes]:
        return await (await self.native()).stream_peek(name, _count(n))

    async def stream_length(self, name: str) -> int:
        return await (await self.native()).stream_length(name)

    async def stream_trim(self, name: str, *, max_len: int, ttl_seconds: int) -> None:
        await (await self.native()).stream_trim(name, _count(max_len), _ttl(ttl_seconds))

    async def event_publish(self, topic: str, body: bytes) -> None:
        await (await self.native()).event_publish(topic, body)

    # --- the worker registry -----------------------------------------------------------------

    async def worker_register(self, automation_type: str, worker_id: str, hardware: dict[str, Any]) -> None:
        await (await self.native()).worker_register(automation_type, worker_id, json.dumps(hardware))

    async def worker_get_config(self, automation_type: str, worker_id: str) -> tuple[dict[str, Any], int]:
        config, gen = await (await self.native()).worker_get_config(automation_type, worker_id)
        return json.loads(config), gen

    async def worker_set_config(
        self, automation_type: str, worker_id: str, config: dict[str, Any]
    ) -> tuple[dict[str, Any], int]:
        """Replaces the config and bumps its generation; ``(config, new generation)``.

        The native backend writes nothing for a worker that never registered, where fleet's
        backends store the config for it (an operator configures a worker before it starts).
        This registers such a worker first with hardware ``{}`` (as fleet's ``InMemoryBackend``
        does); its own ``worker_register`` later fills the hardware in and keeps the config.
        """
        backend = await self.native()
        doc = json.dumps(config)
        outcome, gen = await backend.worker_set_config(automation_type, worker_id, doc)
        if outcome == "not_registered":
            await backend.worker_register(automation_type, worker_id, "{}")
            outcome, gen = await backend.worker_set_config(automation_type, worker_id, doc)
        if outcome != "applied" or gen is None:
            raise RuntimeError(f"switchyard's worker_set_config answered {outcome!r} to an unconditional write")
        return config, gen

    async def worker_set_state(
        self,
        automation_type: str,
        worker_id: str,
        state: str,
        last_error: str | None,
        last_seen: float,
    ) -> None:
        """Overwrites the state report of a registered worker (nothing for an unknown one)."""
        await (await self.native()).worker_set_state(automation_type, worker_id, state, last_error, float(last_seen))

    async def worker_set_stats(self, automation_type: str, worker_id: str, stats: dict[str, Any]) -> None:
        await (await self.native()).worker_set_stats(automation_type, worker_id, json.dumps(stats))

    async def worker_stats_push(
        self,
        automation_type: str,
        worker_id: str,
        ts: float,
        frame: dict[str, Any],
        *,
        max_entries: int = 240,
    ) -> None:
        await (await self.native()).worker_stats_push(
            automation_type, worker_id, float(ts), json.dumps(frame, default=str), _count(max_entries)
        )

    async def worker_stats_history(
        self,
        automation_type: str,
        worker_id: str,
        *,
        since: float = 0,
        limit: int = 240,
    ) -> list[dict[str, Any]]:
        raw = await (await self.native()).worker_stats_history(automation_type, worker_id, float(since), _count(limit))
        out: list[dict[str, Any]] = []
        for entry in raw:
            try:
                out.append(json.loads(entry))
            except ValueError:
                continue
        return out

    async def worker_get(self, automation_type: str, worker_id: str) -> dict[str, Any] | None:
        """The record in fleet's shape: ``hardware``, ``config``, ``config_gen``, ``state``
        (``"IDLE"`` before any report), ``last_seen`` (``0.0`` before any), ``last_error``
        (``None`` for none), ``stats`` (``{}`` before any)."""
        rec = await (await self.native()).worker_get(automation_type, worker_id)
        if rec is None:
            return None
        return {
            "hardware": json.loads(rec.hardware) if rec.hardware else {},
            "config": json.loads(rec.config) if rec.config else {},
            "config_gen": rec.config_gen,
            "state": rec.state or "IDLE",
            "last_seen": float(rec.last_seen or 0),
            "last_error": rec.last_error or None,
            "stats": self._stats_of(rec),
        }

    def _stats_of(self, rec: _native.WorkerRecord) -> dict[str, Any]:
        return json.loads(rec.stats) if rec.stats else {}

    async def worker_list(self, automation_type: str | None = None) -> list[tuple[str, str]]:
        return [(at, wid) for at, wid in await (await self.native()).worker_list(automation_type)]

    async def worker_remove(self, automation_type: str, worker_id: str) -> bool:
        return await (await self.native()).worker_remove(automation_type, worker_id)

    # --- the catalog -------------------------------------------------------------------------

    async def catalog_set(self, automation_type: str, doc: bytes) -> None:
        await (await self.native()).catalog_set(automation_type, doc)

    async def catalog_get(self, automation_type: str) -> bytes | None:
        return await (await self.native()).catalog_get(automation_type)

    async def catalog_all(self) -> dict[str, bytes]:
        return dict(await (await self.native()).catalog_all())

    # --- bookkeeping -------------------------------------------------------------------------

    def _maybe_prune(self) -> None:
        """Forgets receipts and claims that lapsed over an hour ago (a slot that died holding
        them), at most once a minute, so a long-lived worker's memory stays bounded."""
        mono = time.monotonic()
        if mono - self._last_prune < _PRUNE_EVERY_SECONDS:
            return
        self._last_prune = mono
        cutoff = time.time() - STALE_AFTER_SECONDS
        for name in list(self._held):
            by_key = self._held[name]
            for key in list(by_key):
                kept = deque(h for h in by_key[key] if h.visible_until >= cutoff)
                if kept:
                    by_key[key] = kept
                else:
                    del by_key[key]
            if not by_key:
                del self._held[name]
        for claim_key, (_token, until) in list(self._claims.items()):
            if until < cutoff:
                del self._claims[claim_key]
        for dead_key, until in list(self._dead_lettered.items()):
            if until < cutoff:
                del self._dead_lettered[dead_key]


def backend_from_url(url: str) -> SwitchyardBackend:
    """The ``fleet.backends`` entry point: ``switchyard+redis://…``, ``switchyard+sqlite:///…``,
    ``switchyard+postgres://…``, ``switchyard+memory://`` (see :mod:`switchyard.fleet`)."""
    return SwitchyardBackend(url)
