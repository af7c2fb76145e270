"""fleet's own ``RedisBackend`` and ``switchyard+redis`` on one Redis: each reads and moves what
the other wrote (tasks, dead letters, KV, counters, pools, locks, streams, events, the worker
registry and the catalog), since the Rust backend keeps fleet-framework's key layout."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fleet.core.backend import RedisBackend
from fleet.core.events import EventBus, first
from switchyard.fleet import SwitchyardBackend
from sy_fleet_helpers import DB_INTEROP, flush_db, redis_db_url


def envelope(task_id: str, **extra: Any) -> bytes:
    return json.dumps({"id": task_id, "payload": {"n": 1}, "attempt": 0, **extra}).encode()


@pytest.fixture
async def pair(redis_url: str) -> AsyncIterator[tuple[RedisBackend, SwitchyardBackend]]:
    url = redis_db_url(redis_url, DB_INTEROP)
    await flush_db(url)
    fleet = RedisBackend(url)
    ours = SwitchyardBackend("switchyard+" + url)
    try:
        yield fleet, ours
    finally:
        await ours.aclose()
        await fleet.aclose()


async def test_tasks_fleet_pushes_we_reserve_and_ack(pair: tuple[RedisBackend, SwitchyardBackend], unique: str) -> None:
    fleet, ours = pair
    q = f"q-{unique}"
    await fleet.queue_push(q, envelope("n"))
    await fleet.queue_push(q, envelope("h"), priority=3)
    await fleet.queue_push(q, envelope("l"), priority=-1)
    assert await ours.queue_size(q) == 3
    assert await ours.queue_peek(q, 10) == [envelope("h"), envelope("n"), envelope("l")]
    assert await ours.queue_reserve(q, 0.2, 30) == envelope("h")
    assert await ours.queue_reserve(q, 0.2, 30) == envelope("n")
    assert await fleet.queue_size(q) == 1
    assert await ours.queue_ack(q, "h") is True
    assert await ours.queue_nack(q, "n", envelope("n", attempt=1), delay_seconds=0) is True
    # fleet's consumer takes the requeued task and the low one, in order.
    assert await fleet.queue_reserve(q, 0.2, 30) == envelope("n", attempt=1)
    assert await fleet.queue_reserve(q, 0.2, 30) == envelope("l")
    assert await fleet.queue_ack(q, "n") is True
    assert await fleet.queue_ack(q, "l") is True
    assert await fleet.queue_size(q) == await ours.queue_size(q) == 0
    assert await fleet.queue_sweep_expired(q, now=time.time() + 3600) == 0
    assert await ours.queue_sweep_expired(q) == 0


async def test_tasks_we_push_fleet_reserves_and_acks(pair: tuple[RedisBackend, SwitchyardBackend], unique: str) -> None:
    fleet, ours = pair
    q = f"q-{unique}"
    await ours.queue_push(q, envelope("a"))
    await ours.queue_push(q, envelope("b"), priority=1)
    assert await fleet.queue_size(q) == 2
    assert await fleet.queue_peek(q, 10) == [envelope("b"), envelope("a")]
    assert await fleet.queue_reserve(q, 0.2, 30) == envelope("b")
    assert await fleet.queue_ack(q, "b") is True
    assert await fleet.queue_reserve(q, 1.0, 30) == envelope("a")  # BLPOP path
    assert await fleet.queue_nack(q, "a", envelope("a", attempt=1), delay_seconds=0) is True
    assert await ours.queue_reserve(q, 0.2, 30) == envelope("a", attempt=1)
    assert await ours.queue_ack(q, "a") is True
    assert await ours.queue_size(q) == await fleet.queue_size(q) == 0


async def test_lapsed_reservations_are_swept_by_either(
    pair: tuple[RedisBackend, SwitchyardBackend], unique: str
) -> None:
    fleet, ours = pair
    q = f"q-{unique}"
    # fleet's consumer dies holding a task: our sweeper (a master on switchyard) returns it.
    await fleet.queue_push(q, envelope("f"))
    assert await fleet.queue_reserve(q, 0.2, 1) == envelope("f")
    # Ours dies holding one: fleet's sweeper (a master on RedisBackend) returns it.
    await ours.queue_push(q, envelope("o"))
    assert await ours.queue_reserve(q, 0.2, 1) == envelope("o")
    await asyncio.sleep(1.3)
    assert await ours.queue_sweep_expired(q) + await fleet.queue_sweep_expired(q) == 2
    got = {await ours.queue_reserve(q, 0.2, 30), await ours.queue_reserve(q, 0.2, 30)}
    assert got == {envelope("f"), envelope("o")}
    assert await ours.queue_ack(q, "f") is True
    assert await ours.queue_ack(q, "o") is True
    assert await ours.queue_size(q) == 0


async def test_delayed_retries_cross_over(pair: tuple[RedisBackend, SwitchyardBackend], unique: str) -> None:
    fleet, ours = pair
    q = f"q-{unique}"
    # fleet's worker schedules a retry; our consumer takes it once due.
    await fleet.queue_push(q, envelope("r"))
    assert await fleet.queue_reserve(q, 0.2, 30) == envelope("r")
    assert await fleet.queue_nack(q, "r", envelope("r", attempt=1), delay_seconds=0.5) is True
    assert await ours.queue_reserve(q, 0.1, 30) is None
    await asyncio.sleep(0.6)
    assert await ours.queue_reserve(q, 0.5, 30) == envelope("r", attempt=1)
    # We schedule the retry; fleet's consumer takes it once due.
    assert await ours.queue_nack(q, "r", envelope("r", attempt=2), delay_seconds=0.5) is True
    assert await fleet.queue_reserve(q, 0.2, 30) is None
    await asyncio.sleep(0.6)
    assert await fleet.queue_reserve(q, 0.5, 30) == envelope("r", attempt=2)
    assert await fleet.queue_ack(q, "r") is True


async def test_dead_letters(pair: tuple[RedisBackend, SwitchyardBackend], unique: str) -> None:
    fleet, ours = pair
    q = f"q-{unique}"
    await fleet.queue_dead(q, envelope("d1"))
    await ours.queue_dead(q, envelope("d2"))
    assert await ours.dlq_length(q) == await fleet.dlq_length(q) == 2
    assert await ours.dlq_peek(q, 10) == await fleet.dlq_peek(q, 10) == [envelope("d1"), envelope("d2")]
    assert await ours.dlq_pop(q, 1) == [envelope("d1")]
    assert await fleet.dlq_pop(q, 5) == [envelope("d2")]
    await ours.queue_dead(q, b"x")
    assert await fleet.dlq_clear(q) == 1
    assert await ours.dlq_length(q) == 0


async def test_kv_and_counters(pair: tuple[RedisBackend, SwitchyardBackend], unique: str) -> None:
    fleet, ours = pair
    ns = f"ns-{unique}"
    await fleet.kv_set(ns, "k", b"from fleet", None)
    assert await ours.kv_get(ns, "k") == b"from fleet"
    await ours.kv_set(ns, "k2", b"from switchyard", 100)
    assert await fleet.kv_get(ns, "k2") == b"from switchyard"
    assert await fleet.r.ttl(f"fleet:kv:{ns}:k2") in range(95, 101)
    assert await ours.kv_setnx(ns, "k", b"no", None) is False
    assert await fleet.kv_setnx(ns, "k2", b"no", None) is False
    assert await ours.kv_del(ns, "k") is True
    assert await fleet.kv_get(ns, "k") is None
    await ours.kv_set(ns, "short", b"s", 1)
    await asyncio.sleep(1.2)
    assert await fleet.kv_get(ns, "short") is None

    c = f"c-{unique}"
    assert await fleet.counter_incr(c, 5) == 5
    assert await ours.counter_incr(c, 2) == 7
    assert await fleet.counter_get(c) == 7
    await ours.counter_set(c, -3)
    assert await fleet.counter_get(c) == -3
    await fleet.counter_del(c)
    assert await ours.counter_get(c) == 0
    await ours.counter_incr(c, 1)
    await ours.counter_del(c)
    assert await fleet.counter_get(c) == 0


async def test_pools(pair: tuple[RedisBackend, SwitchyardBackend], unique: str) -> None:
    fleet, ours = pair
    pool = f"p-{unique}"
    await fleet.pool_put(pool, "f1", b'{"ip": "1.1.1.1"}', {"country": "de"}, 300)
    await ours.pool_put(pool, "o1", b'{"ip": "2.2.2.2"}', {"country": "us", "n": 1.5}, None)
    by_fleet = {i.id: (i.payload, i.tags, i.expires_at is None) for i in await fleet.pool_list(pool)}
    by_ours = {i.id: (i.payload, i.tags, i.expires_at is None) for i in await ours.pool_list(pool)}
    assert (
        by_fleet
        == by_ours
        == {
            "f1": (b'{"ip": "1.1.1.1"}', {"country": "de"}, False),
            "o1": (b'{"ip": "2.2.2.2"}', {"country": "us", "n": 1.5}, True),
        }
    )
    assert await ours.pool_size(pool) == await fleet.pool_size(pool) == 2
    claimed = await ours.pool_claim_any(pool, {"country": "de"}, 30)
    assert claimed is not None and claimed.id == "f1"
    # fleet sees our claim and skips the item.
    in_use = {i.id: i.in_use_until for i in await fleet.pool_list(pool)}
    assert in_use["f1"] is not None and in_use["o1"] is None
    assert await fleet.pool_claim_any(pool, {"country": "de"}, 30) is None
    # We see fleet's claim and skip the item.
    theirs = await fleet.pool_claim_any(pool, {}, 30)
    assert theirs is not None and theirs.id == "o1"
    assert await ours.pool_claim_any(pool, {}, 30) is None
    assert await ours.pool_release(pool, "f1") is True
    assert (await fleet.pool_claim_any(pool, {"country": "de"}, 30)).id == "f1"  # type: ignore[union-attr]
    assert await fleet.pool_remove(pool, "o1") is True
    assert await ours.pool_remove(pool, "f1") is True
    assert await fleet.pool_size(pool) == await ours.pool_size(pool) == 0


async def test_locks(pair: tuple[RedisBackend, SwitchyardBackend], unique: str) -> None:
    fleet, ours = pair
    lock = f"l-{unique}"
    token = await fleet.lock_acquire(lock, 30, 0)
    assert token
    assert await ours.lock_acquire(lock, 30, 0.2) is None
    assert await ours.lock_release(lock, token) is True  # a token works wherever it is presented
    mine = await ours.lock_acquire(lock, 30, 0)
    assert mine
    assert await fleet.lock_acquire(lock, 30, 0.2) is None
    assert await fleet.lock_release(lock, mine) is True
    assert await fleet.lock_acquire(lock, 30, 0)


async def test_streams_and_their_events(pair: tuple[RedisBackend, SwitchyardBackend], unique: str) -> None:
    fleet, ours = pair
    s = f"s-{unique}"
    await fleet.stream_push(s, b'{"n": 1}', score=100.0, max_len=0, ttl_seconds=0)
    await ours.stream_push(s, b'{"n": 2}', score=200.0, max_len=0, ttl_seconds=0)
    assert await ours.stream_peek(s, 10) == await fleet.stream_peek(s, 10) == [b'{"n": 1}', b'{"n": 2}']
    assert await fleet.stream_length(s) == await ours.stream_length(s) == 2
    assert await ours.stream_pop(s, 1) == [b'{"n": 1}']
    assert await fleet.stream_pop(s, 5) == [b'{"n": 2}']
    # A push announces its score on `<name>.emit`, as fleet's does (a subscriber's EventBus reads it).
    bus = EventBus(fleet.r)
    waiter = asyncio.create_task(first(f"{s}.emit", bus, timeout=5))
    await asyncio.sleep(0.2)
    await ours.stream_push(s, b'{"n": 3}', score=1234.5, max_len=0, ttl_seconds=0)
    assert await waiter == 1234.5


async def test_events_through_fleets_event_bus(pair: tuple[RedisBackend, SwitchyardBackend], unique: str) -> None:
    """fleet's worker hands ``EventBus(backend.r)`` to every slot: ours carries it on the same
    ``event:<topic>`` channels as fleet's Redis client."""
    fleet, ours = pair
    topic = f"t-{unique}"
    fleet_bus, our_bus = EventBus(fleet.r), EventBus(ours.r)  # type: ignore[arg-type]
    # fleet publishes, we listen.
    waiter = asyncio.create_task(first(topic, our_bus, timeout=5))
    await asyncio.sleep(0.2)
    await fleet_bus.publish(topic, {"from": "fleet"})
    assert await waiter == {"from": "fleet"}
    # We publish (through the bus and through the protocol), fleet listens.
    waiter = asyncio.create_task(first(topic, fleet_bus, timeout=5))
    await asyncio.sleep(0.2)
    await our_bus.publish(topic, {"from": "switchyard"})
    assert await waiter == {"from": "switchyard"}
    waiter = asyncio.create_task(first(topic, fleet_bus, timeout=5))
    await asyncio.sleep(0.2)
    await ours.event_publish(topic, b'{"raw": true}')
    assert await waiter == {"raw": True}
    with pytest.raises(ValueError, match="event:<topic>"):
        await ours.r.publish("not-an-event-channel", "x")


async def test_worker_registry(pair: tuple[RedisBackend, SwitchyardBackend], unique: str) -> None:
    fleet, ours = pair
    at = f"auto-{unique}"
    hw = {"cores": 4, "ram_gb": 8, "hostname": "box", "kernel": "6.8"}
    # fleet writes, we read: the same dict.
    await fleet.worker_register(at, "wf", hw)
    await fleet.worker_set_config(at, "wf", {"enabled": True, "slots": 3})
    await fleet.worker_set_state(at, "wf", "RUNNING", None, 1700000000.25)
    await fleet.worker_set_stats(at, "wf", {"slots": 3, "cpu_pct": 1.5})
    await fleet.worker_stats_push(at, "wf", 10.0, {"ts": 10, "slots": 3})
    assert without_stats(await ours.worker_get(at, "wf")) == without_stats(await fleet.worker_get(at, "wf"))
    assert (await ours.worker_get(at, "wf"))["config_gen"] == 1  # type: ignore[index]
    assert await ours.worker_get_config(at, "wf") == ({"enabled": True, "slots": 3}, 1)
    assert await ours.worker_stats_history(at, "wf") == [{"ts": 10, "slots": 3}]
    # We write, fleet reads.
    await ours.worker_register(at, "wo", hw)
    assert await ours.worker_set_config(at, "wo", {"slots": 1}) == ({"slots": 1}, 1)
    await ours.worker_set_state(at, "wo", "ERROR", "it broke", 1700000001.5)
    await ours.worker_set_stats(at, "wo", {"slots": 1})
    await ours.worker_stats_push(at, "wo", 11.0, {"ts": 11})
    assert without_stats(await fleet.worker_get(at, "wo")) == without_stats(await ours.worker_get(at, "wo"))
    assert (await fleet.worker_get(at, "wo"))["last_error"] == "it broke"  # type: ignore[index]
    assert await fleet.worker_stats_history(at, "wo") == [{"ts": 11}]
    # Config generations interleave: each write bumps the one counter.
    assert (await fleet.worker_set_config(at, "wo", {"slots": 2}))[1] == 2
    assert await ours.worker_set_config(at, "wo", {"slots": 3}) == ({"slots": 3}, 3)
    assert await fleet.worker_get_config(at, "wo") == ({"slots": 3}, 3)
    assert sorted(await fleet.worker_list(at)) == sorted(await ours.worker_list(at)) == [(at, "wf"), (at, "wo")]
    assert sorted(await fleet.worker_list()) == sorted(await ours.worker_list())
    assert await ours.worker_remove(at, "wf") is True
    assert await fleet.worker_get(at, "wf") is None
    assert await fleet.worker_remove(at, "wo") is True
    assert await ours.worker_get(at, "wo") is None
    assert await ours.worker_list(at) == await fleet.worker_list(at) == []


def without_stats(record: dict[str, Any] | None) -> dict[str, Any]:
    """The record but its stats document (compared in test_worker_stats_cross_read)."""
    assert record is not None
    return {k: v for k, v in record.items() if k != "stats"}


async def test_worker_stats_cross_read(pair: tuple[RedisBackend, SwitchyardBackend], unique: str) -> None:
    fleet, ours = pair
    at = f"auto-{unique}"
    await fleet.worker_register(at, "wf", {"cores": 1})
    await fleet.worker_set_stats(at, "wf", {"slots": 3, "cpu_pct": 1.5})
    assert await ours.worker_get(at, "wf") == await fleet.worker_get(at, "wf")
    await ours.worker_register(at, "wo", {"cores": 1})
    await ours.worker_set_stats(at, "wo", {"slots": 1})
    assert (await fleet.worker_get(at, "wo"))["stats"] == {"slots": 1}  # type: ignore[index]
    assert await ours.worker_get(at, "wo") == await fleet.worker_get(at, "wo")


async def test_catalog(pair: tuple[RedisBackend, SwitchyardBackend], unique: str) -> None:
    fleet, ours = pair
    await fleet.catalog_set(f"a-{unique}", b'{"kind": "BatchAutomation"}')
    await ours.catalog_set(f"b-{unique}", b'{"kind": "ContinuousAutomation"}')
    assert await ours.catalog_all() == await fleet.catalog_all()
    assert await fleet.catalog_get(f"b-{unique}") == b'{"kind": "ContinuousAutomation"}'
    assert await ours.catalog_get(f"a-{unique}") == b'{"kind": "BatchAutomation"}'
