"""fleet-framework's ``Backend`` protocol, method by method, on ``switchyard+redis``,
``switchyard+sqlite`` and ``switchyard+postgres``: every call is made on fleet's own backend
(``RedisBackend`` on its own Redis database, and ``InMemoryBackend``) and on ours, and the
answers are compared. Where fleet's two backends disagree with each other, or where ours
deliberately answers otherwise, the test says so and checks our answer on its own."""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from typing import Any

import pytest
from fleet.core.backend import Backend, RawItem, RedisBackend
from fleet.core.memory_backend import InMemoryBackend
from switchyard.fleet import SwitchyardBackend

Ref = RedisBackend | InMemoryBackend


async def same(ref: Ref, ours: SwitchyardBackend, method: str, *args: Any, **kwargs: Any) -> Any:
    """Calls ``method`` on both backends; their answers must be equal. Returns ours."""
    theirs = await getattr(ref, method)(*args, **kwargs)
    mine = await getattr(ours, method)(*args, **kwargs)
    assert mine == theirs, f"{method}{args}{kwargs or ''}: fleet's {type(ref).__name__} {theirs!r}, ours {mine!r}"
    return mine


async def both(ref: Ref, ours: SwitchyardBackend, method: str, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    return await getattr(ref, method)(*args, **kwargs), await getattr(ours, method)(*args, **kwargs)


def envelope(task_id: str, **extra: Any) -> bytes:
    return json.dumps({"id": task_id, "payload": {"n": 1}, "attempt": 0, **extra}).encode()


def protocol_methods() -> list[str]:
    return sorted(
        name for name, value in vars(Backend).items() if inspect.iscoroutinefunction(value) and not name.startswith("_")
    )


# --- the protocol's shape ------------------------------------------------------------------------


def test_protocol_is_implemented_with_fleets_signatures() -> None:
    backend = SwitchyardBackend("switchyard+memory://")
    assert isinstance(backend, Backend)
    names = protocol_methods()
    assert len(names) > 40
    for name in names:
        theirs = inspect.signature(getattr(Backend, name))
        mine = inspect.signature(getattr(SwitchyardBackend, name))
        assert inspect.iscoroutinefunction(getattr(SwitchyardBackend, name)), name
        shape = [(p.name, p.kind, p.default) for p in theirs.parameters.values()]
        assert [(p.name, p.kind, p.default) for p in mine.parameters.values()] == shape, name
    # What fleet's worker and CLI use beyond the protocol (``RedisBackend`` has both).
    assert inspect.iscoroutinefunction(SwitchyardBackend.aclose)
    assert hasattr(backend.r, "publish") and hasattr(backend.r, "pubsub")


# --- kv ------------------------------------------------------------------------------------------


async def test_kv(ref: Ref, ours: SwitchyardBackend, unique: str) -> None:
    ns = f"ns-{unique}"
    await same(ref, ours, "kv_get", ns, "a")
    await same(ref, ours, "kv_set", ns, "a", b"1", None)
    await same(ref, ours, "kv_get", ns, "a")
    await same(ref, ours, "kv_set", ns, "a", b"\x00\xff binary", 0)
    await same(ref, ours, "kv_get", ns, "a")
    await same(ref, ours, "kv_setnx", ns, "a", b"2", None)
    await same(ref, ours, "kv_setnx", ns, "b", b"2", None)
    await same(ref, ours, "kv_get", ns, "b")
    await same(ref, ours, "kv_get", "other-" + ns, "b")
    await same(ref, ours, "kv_del", ns, "b")
    await same(ref, ours, "kv_del", ns, "b")
    await same(ref, ours, "kv_get", ns, "b")
    # TTLs: 1 s expires, 0 and None never do (fleet's rule: only ttl > 0 expires).
    await same(ref, ours, "kv_set", ns, "ttl", b"x", 1)
    await same(ref, ours, "kv_setnx", ns, "ttl-nx", b"y", 1)
    await same(ref, ours, "kv_setnx", ns, "zero", b"z", 0)
    await same(ref, ours, "kv_get", ns, "ttl")
    await asyncio.sleep(1.3)
    await same(ref, ours, "kv_get", ns, "ttl")
    await same(ref, ours, "kv_get", ns, "ttl-nx")
    await same(ref, ours, "kv_get", ns, "zero")
    await same(ref, ours, "kv_setnx", ns, "ttl-nx", b"again", None)
    await same(ref, ours, "kv_get", ns, "ttl-nx")
    await same(ref, ours, "kv_get", ns, "a")


# --- pools ---------------------------------------------------------------------------------------


def pool_view(items: list[RawItem]) -> list[tuple[Any, ...]]:
    """What must agree: everything but the exact times (taken a few ms apart)."""
    return sorted((i.id, i.payload, i.tags, i.expires_at is None, i.in_use_until is None) for i in items)


def close_times(a: list[RawItem], b: list[RawItem]) -> None:
    by_id = {i.id: i for i in a}
    for item in b:
        other = by_id[item.id]
        if item.expires_at is not None:
            assert abs(item.expires_at - other.expires_at) < 2, item.id  # type: ignore[operator]


async def test_pools(ref: Ref, ours: SwitchyardBackend, unique: str) -> None:
    pool = f"pool-{unique}"
    await same(ref, ours, "pool_size", pool)
    assert await same(ref, ours, "pool_list", pool) == []
    await same(ref, ours, "pool_put", pool, "never", b'{"k": 1}', {"country": "de", "tier": 1}, None)
    await same(ref, ours, "pool_put", pool, "long", b'{"k": 2}', {"country": "de", "tier": 2}, 300)
    await same(ref, ours, "pool_put", pool, "short", b'{"k": 3}', {"country": "us", "tier": 1}, 100)
    await same(ref, ours, "pool_put", pool, "zero-ttl", b"raw", {}, 0)
    await same(ref, ours, "pool_size", pool)
    theirs, mine = await both(ref, ours, "pool_list", pool)
    assert pool_view(mine) == pool_view(theirs)
    close_times(theirs, mine)

    # Claims: matching tags, latest expiry first, never-expiring items last.
    claims = []
    for where in ({"country": "de"}, {"country": "de"}, {"country": "de"}, {"tier": 1}, {"nope": 1}):
        theirs, mine = await both(ref, ours, "pool_claim_any", pool, where, 30)
        assert (mine and mine.id) == (theirs and theirs.id), where
        if mine is not None:
            assert isinstance(mine, RawItem)
            assert (mine.payload, mine.tags, mine.expires_at is None) == (
                theirs.payload,
                theirs.tags,
                theirs.expires_at is None,
            )
            # The claim's end (as InMemoryBackend; fleet's RedisBackend reports the item as it
            # was listed before the claim: None).
            assert mine.in_use_until is not None and abs(mine.in_use_until - (time.time() + 30)) < 5
            claims.append(mine.id)
    assert claims == ["long", "never", "short"]
    theirs, mine = await both(ref, ours, "pool_list", pool)
    assert pool_view(mine) == pool_view(theirs)
    assert {i.id for i in mine if i.in_use_until is not None} == {"long", "never", "short"}

    await same(ref, ours, "pool_release", pool, "long")
    await same(ref, ours, "pool_release", pool, "long")  # released already
    await same(ref, ours, "pool_release", pool, "zero-ttl")  # never claimed
    theirs, mine = await both(ref, ours, "pool_claim_any", pool, {"country": "de"}, 30)
    assert mine.id == theirs.id == "long"
    await same(ref, ours, "pool_remove", pool, "long")
    await same(ref, ours, "pool_remove", pool, "long")
    await same(ref, ours, "pool_release", pool, "long")
    await same(ref, ours, "pool_size", pool)
    # A claim lapses after its hold; the item can be claimed again.
    await same(ref, ours, "pool_put", pool, "brief", b"b", {"lapse": True}, None)
    theirs, mine = await both(ref, ours, "pool_claim_any", pool, {"lapse": True}, 1)
    assert mine.id == theirs.id == "brief"
    await same(ref, ours, "pool_claim_any", pool, {"lapse": True}, 1)
    # Items expire.
    await same(ref, ours, "pool_put", pool, "expiring", b"e", {"gone": True}, 1)
    await asyncio.sleep(1.3)
    theirs, mine = await both(ref, ours, "pool_claim_any", pool, {"lapse": True}, 30)
    assert mine.id == theirs.id == "brief"
    await same(ref, ours, "pool_claim_any", pool, {"gone": True}, 30)
    theirs, mine = await both(ref, ours, "pool_list", pool)
    assert pool_view(mine) == pool_view(theirs)
    assert "expiring" not in {i.id for i in mine}
    # pool_size counts live items only; fleet's RedisBackend counts the expired item its hash
    # still holds until the next put prunes it (HLEN).
    assert await ours.pool_size(pool) == len(mine)


async def test_pool_release_needs_this_objects_claim(ours: SwitchyardBackend, our_url: str, unique: str) -> None:
    """A claim made through another backend object is not released here (fleet's RedisBackend
    deletes anyone's claim): receipts of claims live in the object that claimed."""
    pool = f"pool-{unique}"
    await ours.pool_put(pool, "i", b"p", {}, None)
    other = SwitchyardBackend(our_url)
    try:
        claimed = await other.pool_claim_any(pool, {}, 30)
        assert claimed is not None and claimed.id == "i"
        assert await ours.pool_release(pool, "i") is False
        assert await ours.pool_claim_any(pool, {}, 30) is None
        assert await other.pool_release(pool, "i") is True
        assert (await ours.pool_claim_any(pool, {}, 30)).id == "i"  # type: ignore[union-attr]
    finally:
        await other.aclose()


# --- locks and counters --------------------------------------------------------------------------


async def test_locks(ref: Ref, ours: SwitchyardBackend, unique: str) -> None:
    lock = f"lock-{unique}"
    theirs, mine = await both(ref, ours, "lock_acquire", lock, 30, 0)
    assert isinstance(theirs, str) and isinstance(mine, str) and mine
    await same(ref, ours, "lock_acquire", lock, 30, 0.1)
    await same(ref, ours, "lock_release", lock, "not-the-token")
    assert await ours.lock_release(lock, mine) is await ref.lock_release(lock, theirs) is True
    await same(ref, ours, "lock_release", lock, "gone")
    # A hold lapses: a waiter gets the lock once it does (hold 0 is one second, as in fleet).
    theirs, mine = await both(ref, ours, "lock_acquire", lock, 0, 0)
    assert theirs and mine
    started = time.monotonic()
    theirs2, mine2 = await asyncio.gather(ref.lock_acquire(lock, 30, 3.0), ours.lock_acquire(lock, 30, 3.0))
    assert theirs2 and mine2 and mine2 != mine
    assert 0.5 < time.monotonic() - started < 6.0
    assert await ours.lock_release(lock, mine) is False  # the lapsed holder's token


async def test_counters(ref: Ref, ours: SwitchyardBackend, unique: str) -> None:
    c = f"counter-{unique}"
    await same(ref, ours, "counter_get", c)
    await same(ref, ours, "counter_incr", c, 1)
    await same(ref, ours, "counter_incr", c, 5)
    await same(ref, ours, "counter_incr", c, -10)
    await same(ref, ours, "counter_get", c)
    await same(ref, ours, "counter_set", c, 2**40)
    await same(ref, ours, "counter_get", c)
    assert await same(ref, ours, "counter_del", c) is None
    await same(ref, ours, "counter_get", c)
    await same(ref, ours, "counter_del", c)
    await same(ref, ours, "counter_incr", c, 3)


# --- the job queue -------------------------------------------------------------------------------


async def test_queue_priorities_reserve_ack(ref: Ref, ours: SwitchyardBackend, unique: str) -> None:
    q = f"q-{unique}"
    await same(ref, ours, "queue_size", q)
    await same(ref, ours, "queue_peek", q, 5)
    await same(ref, ours, "queue_reserve", q, 0.2, 30)
    bodies = {
        "low": envelope("low"),
        "n1": envelope("n1"),
        "high": envelope("high"),
        "n2": envelope("n2"),
        "high2": envelope("high2"),
    }
    await same(ref, ours, "queue_push", q, bodies["low"], priority=-5)
    await same(ref, ours, "queue_push", q, bodies["n1"])
    await same(ref, ours, "queue_push", q, bodies["high"], priority=1)
    await same(ref, ours, "queue_push", q, bodies["n2"], priority=0)
    await same(ref, ours, "queue_push", q, bodies["high2"], priority=7)
    await same(ref, ours, "queue_size", q)
    await same(ref, ours, "queue_peek", q, 0)
    await same(ref, ours, "queue_peek", q, 3)
    await same(ref, ours, "queue_peek", q, 50)
    order = []
    for _ in range(5):
        body = await same(ref, ours, "queue_reserve", q, 0.2, 30)
        order.append(json.loads(body)["id"])
    assert order == ["high", "high2", "n1", "n2", "low"]
    await same(ref, ours, "queue_size", q)
    await same(ref, ours, "queue_reserve", q, 0.2, 30)
    for tid in order:
        await same(ref, ours, "queue_ack", q, tid)
    await same(ref, ours, "queue_ack", q, "high")  # acked already
    await same(ref, ours, "queue_ack", q, "never-reserved")
    await same(ref, ours, "queue_sweep_expired", q)
    await same(ref, ours, "queue_size", q)


async def test_queue_reserve_waits(ref: Ref, ours: SwitchyardBackend, unique: str) -> None:
    q = f"q-{unique}"
    for backend in (ref, ours):
        started = time.monotonic()
        assert await backend.queue_reserve(q, 1.0, 30) is None
        assert 0.8 < time.monotonic() - started < 5.0, type(backend).__name__

    async def push_later() -> None:
        await asyncio.sleep(0.3)
        await ref.queue_push(q, envelope("late"))
        await ours.queue_push(q, envelope("late"))

    pusher = asyncio.create_task(push_later())
    theirs, mine = await asyncio.gather(ref.queue_reserve(q, 2.0, 30), ours.queue_reserve(q, 2.0, 30))
    await pusher
    assert mine == theirs == envelope("late")


async def test_queue_nack(ref: Ref, ours: SwitchyardBackend, unique: str) -> None:
    q = f"q-{unique}"
    await same(ref, ours, "queue_push", q, envelope("a"))
    await same(ref, ours, "queue_push", q, envelope("b"))
    await same(ref, ours, "queue_reserve", q, 0.2, 30)
    retry = envelope("a", attempt=1)
    # Requeued now: at the end of its tier.
    await same(ref, ours, "queue_nack", q, "a", retry, delay_seconds=0)
    await same(ref, ours, "queue_size", q)
    await same(ref, ours, "queue_peek", q, 5)
    assert await same(ref, ours, "queue_reserve", q, 0.2, 30) == envelope("b")
    assert await same(ref, ours, "queue_reserve", q, 0.2, 30) == retry
    # Requeued later: not waiting, not reservable before its time.
    retry2 = envelope("a", attempt=2)
    await same(ref, ours, "queue_nack", q, "a", retry2, delay_seconds=1.0)
    await same(ref, ours, "queue_size", q)
    await same(ref, ours, "queue_reserve", q, 0.2, 30)
    await asyncio.sleep(1.1)
    assert await same(ref, ours, "queue_reserve", q, 0.5, 30) == retry2
    await same(ref, ours, "queue_ack", q, "a")
    await same(ref, ours, "queue_ack", q, "b")
    await same(ref, ours, "queue_size", q)
    # A task id this object holds no reservation of: fleet requeues the body anyway
    # (RedisBackend answers True, InMemoryBackend False); ours answers False and requeues
    # nothing, since the reservation, if any, is someone else's and is redelivered on expiry.
    assert await ours.queue_nack(q, "unknown", envelope("unknown"), delay_seconds=0) is False
    assert await ours.queue_size(q) == 0


async def test_queue_nack_keeps_the_tier(ref: Ref, ours: SwitchyardBackend, unique: str) -> None:
    """Deliberate difference: fleet requeues a nacked task into the normal tier whatever its
    priority was; switchyard into the tier it came from (so a retried urgent task stays urgent)."""
    q = f"q-{unique}"
    for backend in (ref, ours):
        await backend.queue_push(q, envelope("urgent"), priority=1)
        await backend.queue_push(q, envelope("normal"))
        assert await backend.queue_reserve(q, 0.2, 30) == envelope("urgent")
        assert await backend.queue_nack(q, "urgent", envelope("urgent", attempt=1), delay_seconds=0) in (True, False)
    assert json.loads((await ref.queue_reserve(q, 0.2, 30)) or b"{}")["id"] == "normal"
    assert json.loads((await ours.queue_reserve(q, 0.2, 30)) or b"{}")["id"] == "urgent"


async def test_queue_visibility_and_sweep(ref: Ref, ours: SwitchyardBackend, unique: str) -> None:
    q = f"q-{unique}"
    await same(ref, ours, "queue_push", q, envelope("slow"))
    await same(ref, ours, "queue_reserve", q, 0.2, 1)
    await same(ref, ours, "queue_sweep_expired", q)  # not lapsed yet
    await asyncio.sleep(1.3)
    await same(ref, ours, "queue_sweep_expired", q)
    await same(ref, ours, "queue_sweep_expired", q, now=time.time())  # `now` is accepted (and ignored)
    await same(ref, ours, "queue_size", q)
    assert await same(ref, ours, "queue_reserve", q, 0.2, 30) == envelope("slow")
    # The redelivered task is acked by id although this object also remembers the lapsed
    # reservation: the current one is found.
    await same(ref, ours, "queue_ack", q, "slow")
    await same(ref, ours, "queue_size", q)
    await same(ref, ours, "queue_sweep_expired", q)


async def test_queue_bodies_without_an_id(ours: SwitchyardBackend, unique: str) -> None:
    """fleet files no reservation for a JSON object without an id (it is delivered at most once)
    and one under a random id for a body that is not JSON. Ours: a JSON object without an id is
    filed under "" (fleet's worker acks it as task.id == ""); a non-JSON body under no id, and
    ``queue_dead`` of the very body ends its reservation, so it is not redelivered."""
    q = f"q-{unique}"
    await ours.queue_push(q, b'{"payload": {}}')
    await ours.queue_push(q, b"\xff not json")
    assert await ours.queue_reserve(q, 0.2, 1) == b'{"payload": {}}'
    assert await ours.queue_ack(q, "") is True
    assert await ours.queue_reserve(q, 0.2, 1) == b"\xff not json"
    await ours.queue_dead(q, b"\xff not json")  # what fleet's worker does with a body it cannot parse
    await asyncio.sleep(1.3)
    assert await ours.queue_sweep_expired(q) == 0
    assert await ours.queue_reserve(q, 0.2, 30) is None
    assert await ours.dlq_peek(q, 10) == [b"\xff not json"]


async def test_queue_dead_of_a_task_out_of_retries(ref: Ref, ours: SwitchyardBackend, unique: str) -> None:
    """fleet's worker gives up on a task with queue_dead(updated copy) + queue_ack(id): same
    answers; in switchyard the task ends dead (not completed) and is not redelivered."""
    q = f"q-{unique}"
    await same(ref, ours, "queue_push", q, envelope("doomed"))
    await same(ref, ours, "queue_reserve", q, 0.2, 1)
    last = envelope("doomed", attempt=1, max_attempts=1)
    await same(ref, ours, "queue_dead", q, last)
    await same(ref, ours, "queue_ack", q, "doomed")
    await same(ref, ours, "queue_ack", q, "doomed")
    await same(ref, ours, "dlq_peek", q, 10)
    await asyncio.sleep(1.2)
    await same(ref, ours, "queue_sweep_expired", q)
    await same(ref, ours, "queue_size", q)
    stats = await (await ours.native()).queue_stats(q)
    assert (stats["dead"], stats["dead_lettered"], stats["completed"], stats["in_flight"]) == (1, 1, 0, 0)


async def test_queue_ack_by_another_object_is_false(ours: SwitchyardBackend, our_url: str, unique: str) -> None:
    q = f"q-{unique}"
    await ours.queue_push(q, envelope("t"))
    other = SwitchyardBackend(our_url)
    try:
        assert await other.queue_reserve(q, 0.2, 30) == envelope("t")
        assert await ours.queue_ack(q, "t") is False
        assert await ours.queue_nack(q, "t", envelope("t"), delay_seconds=0) is False
        assert await other.queue_ack(q, "t") is True
        assert await ours.queue_size(q) == 0
    finally:
        await other.aclose()


# --- dead letters --------------------------------------------------------------------------------


async def test_dead_letters(ref: Ref, ours: SwitchyardBackend, unique: str) -> None:
    q = f"q-{unique}"
    await same(ref, ours, "dlq_length", q)
    await same(ref, ours, "dlq_peek", q, 5)
    await same(ref, ours, "dlq_pop", q, 5)
    for i in range(4):
        await same(ref, ours, "queue_dead", q, envelope(f"d{i}"))
    await same(ref, ours, "dlq_length", q)
    await same(ref, ours, "dlq_peek", q, 2)
    await same(ref, ours, "dlq_peek", q, 100)
    # n = 0: InMemoryBackend returns nothing, fleet's RedisBackend one letter (LRANGE 0 0).
    assert await ours.dlq_peek(q, 0) == []
    await same(ref, ours, "dlq_pop", q, 0)
    await same(ref, ours, "dlq_pop", q, 2)
    await same(ref, ours, "dlq_length", q)
    await same(ref, ours, "dlq_peek", q, 10)
    await same(ref, ours, "dlq_clear", q)
    await same(ref, ours, "dlq_clear", q)
    await same(ref, ours, "dlq_length", q)
    await same(ref, ours, "queue_size", q)


# --- streams and events --------------------------------------------------------------------------


async def test_streams(ref: Ref, ours: SwitchyardBackend, unique: str) -> None:
    s = f"s-{unique}"
    now = time.time()
    await same(ref, ours, "stream_length", s)
    await same(ref, ours, "stream_peek", s, 5)
    await same(ref, ours, "stream_pop", s, 5)
    for i in range(5):
        await same(ref, ours, "stream_push", s, b"e%d" % i, score=now + i, max_len=50_000, ttl_seconds=3600)
    await same(ref, ours, "stream_length", s)
    await same(ref, ours, "stream_peek", s, 3)
    await same(ref, ours, "stream_peek", s, 100)
    # n = 0: InMemoryBackend reads nothing, fleet's RedisBackend everything (ZRANGE 0 -1).
    assert await ours.stream_peek(s, 0) == []
    await same(ref, ours, "stream_pop", s, 2)
    await same(ref, ours, "stream_length", s)
    # max_len keeps the highest scores; max_len 0 and ttl 0 keep everything.
    await same(ref, ours, "stream_push", s, b"f", score=now + 20, max_len=2, ttl_seconds=0)
    await same(ref, ours, "stream_peek", s, 10)
    await same(ref, ours, "stream_push", s, b"g", score=now + 21, max_len=0, ttl_seconds=0)
    await same(ref, ours, "stream_peek", s, 10)
    # ttl drops entries scored before the pushed score minus ttl.
    await same(ref, ours, "stream_push", s, b"h", score=now + 1000, max_len=0, ttl_seconds=500)
    await same(ref, ours, "stream_peek", s, 10)
    # stream_trim: ttl relative to now, max_len keeps the highest.
    t = f"t-{unique}"
    for i, age in enumerate((5000, 3000, 10, 5, 0)):
        await same(ref, ours, "stream_push", t, b"t%d" % i, score=now - age, max_len=0, ttl_seconds=0)
    await same(ref, ours, "stream_trim", t, max_len=0, ttl_seconds=0)
    await same(ref, ours, "stream_length", t)
    await same(ref, ours, "stream_trim", t, max_len=0, ttl_seconds=1000)
    await same(ref, ours, "stream_peek", t, 10)
    await same(ref, ours, "stream_trim", t, max_len=2, ttl_seconds=0)
    await same(ref, ours, "stream_peek", t, 10)
    await same(ref, ours, "stream_pop", t, 10)
    await same(ref, ours, "stream_length", t)


async def test_stream_identical_envelope_is_stored_once(ours: SwitchyardBackend, unique: str) -> None:
    """As in fleet's RedisBackend (a sorted set): pushing an identical envelope moves it to the new
    score (fleet's InMemoryBackend keeps both copies)."""
    s = f"s-{unique}"
    for score, envelope_ in ((1.0, b"a"), (2.0, b"b"), (3.0, b"a")):
        await ours.stream_push(s, envelope_, score=score, max_len=0, ttl_seconds=0)
    assert await ours.stream_peek(s, 10) == [b"b", b"a"]


async def test_event_publish(ref: Ref, ours: SwitchyardBackend, unique: str) -> None:
    await same(ref, ours, "event_publish", f"topic-{unique}", b"{}")


# --- the worker registry and the catalog ---------------------------------------------------------


async def test_worker_registry(ref: Ref, ours: SwitchyardBackend, unique: str) -> None:
    at, other_at = f"auto-{unique}", f"other-{unique}"
    hw = {"cores": 8, "ram_gb": 16, "hostname": "h1", "kernel": "6.1"}
    await same(ref, ours, "worker_get", at, "w1")
    await same(ref, ours, "worker_get_config", at, "w1")
    await same(ref, ours, "worker_list", at)
    await same(ref, ours, "worker_register", at, "w1", hw)
    await same(ref, ours, "worker_get", at, "w1")  # every key of fleet's record, compared
    await same(ref, ours, "worker_get_config", at, "w1")
    cfg = {"enabled": True, "slots": 2, "nested": {"a": [1, 2, None]}, "text": "é"}
    assert await same(ref, ours, "worker_set_config", at, "w1", cfg) == (cfg, 1)
    await same(ref, ours, "worker_get_config", at, "w1")
    await same(ref, ours, "worker_set_config", at, "w1", {**cfg, "slots": 3})
    await same(ref, ours, "worker_get_config", at, "w1")
    # Re-registering updates the hardware and keeps config and generation.
    await same(ref, ours, "worker_register", at, "w1", {**hw, "cores": 4})
    await same(ref, ours, "worker_get", at, "w1")
    await same(ref, ours, "worker_set_state", at, "w1", "RUNNING", "boom: it broke", 1712345678.123456)
    await same(ref, ours, "worker_get", at, "w1")
    await same(ref, ours, "worker_set_state", at, "w1", "IDLE", None, last_seen=1712345679.5)
    await same(ref, ours, "worker_get", at, "w1")
    record = await same(ref, ours, "worker_get", at, "w1")
    assert list(record) == ["hardware", "config", "config_gen", "state", "last_seen", "last_error", "stats"]
    # The stats document is compared in test_worker_stats_document.
    await same(ref, ours, "worker_set_stats", at, "w1", {"slots": 2, "cpu_pct": 12.5, "metrics": {"x": 1}})
    for ts in (1.0, 2.0, 3.0, 4.0):
        await same(ref, ours, "worker_stats_push", at, "w1", ts, {"ts": ts, "slots": 1}, max_entries=3)
    await same(ref, ours, "worker_stats_history", at, "w1")
    await same(ref, ours, "worker_stats_history", at, "w1", since=3)
    await same(ref, ours, "worker_stats_history", at, "w1", limit=1)
    await same(ref, ours, "worker_stats_history", at, "w1", since=2.5, limit=5)
    await same(ref, ours, "worker_stats_history", at, "nobody")
    await same(ref, ours, "worker_register", at, "w2", {})
    await same(ref, ours, "worker_register", other_at, "w1", hw)
    await same(ref, ours, "worker_get", at, "w2")
    theirs, mine = await both(ref, ours, "worker_list", at)
    assert sorted(mine) == sorted(theirs) == [(at, "w1"), (at, "w2")]
    theirs, mine = await both(ref, ours, "worker_list")
    assert sorted(mine) == sorted(theirs)
    theirs, mine = await both(ref, ours, "worker_list", None)
    assert sorted(mine) == sorted(theirs)
    await same(ref, ours, "worker_remove", at, "w1")
    await same(ref, ours, "worker_remove", at, "w1")
    await same(ref, ours, "worker_get", at, "w1")
    # Removing a worker deletes its stats history too (fleet's backends keep it).
    assert await ours.worker_stats_history(at, "w1") == []
    theirs, mine = await both(ref, ours, "worker_list")
    assert sorted(mine) == sorted(theirs)
    await same(ref, ours, "worker_get_config", at, "w1")
    # Registered again after a removal: fleet restarts the config generation at 0; switchyard keeps
    # counting from the last one (a worker still running at generation 2 ignores configs numbered
    # 2 or less, so a restarted count would never reach it).
    await same(ref, ours, "worker_register", at, "w1", hw)
    assert (await ref.worker_get_config(at, "w1"))[1] == 0
    assert await ours.worker_get_config(at, "w1") == ({}, 3)


async def test_worker_stats_document(ref: Ref, ours: SwitchyardBackend, unique: str) -> None:
    at = f"auto-{unique}"
    await same(ref, ours, "worker_register", at, "w1", {"cores": 1})
    await same(ref, ours, "worker_set_stats", at, "w1", {"slots": 2, "cpu_pct": 12.5, "metrics": {"x": 1}})
    record = await same(ref, ours, "worker_get", at, "w1")
    assert record["stats"] == {"slots": 2, "cpu_pct": 12.5, "metrics": {"x": 1}}


async def test_worker_config_before_registration(ours: SwitchyardBackend, unique: str) -> None:
    """fleet's master lets an operator configure a worker that has not connected yet (PATCH
    .../workers/{id}/config). The native backend writes nothing for an unregistered worker, so
    the adapter registers it first with hardware {} (as fleet's InMemoryBackend does; fleet's
    RedisBackend stores the config without listing the worker). Its own registration later fills
    the hardware in and keeps the config."""
    at = f"auto-{unique}"
    assert await ours.worker_set_config(at, "early", {"enabled": True, "slots": 1}) == (
        {"enabled": True, "slots": 1},
        1,
    )
    assert await ours.worker_get_config(at, "early") == ({"enabled": True, "slots": 1}, 1)
    assert await ours.worker_list(at) == [(at, "early")]
    await ours.worker_register(at, "early", {"cores": 2})
    record = await ours.worker_get(at, "early")
    assert record is not None
    assert (record["hardware"], record["config"], record["config_gen"]) == (
        {"cores": 2},
        {"enabled": True, "slots": 1},
        1,
    )
    # State and stats of a worker that is not registered are not written (fleet writes them).
    await ours.worker_set_state(at, "ghost", "RUNNING", None, 1.0)
    await ours.worker_set_stats(at, "ghost", {"x": 1})
    await ours.worker_stats_push(at, "ghost", 1.0, {"x": 1})
    assert await ours.worker_get(at, "ghost") is None
    assert await ours.worker_stats_history(at, "ghost") == []


async def test_catalog(ref: Ref, ours: SwitchyardBackend, unique: str) -> None:
    await same(ref, ours, "catalog_all")
    await same(ref, ours, "catalog_get", f"a-{unique}")
    doc = json.dumps({"type": f"a-{unique}", "kind": "BatchAutomation", "config": {}}).encode()
    await same(ref, ours, "catalog_set", f"a-{unique}", doc)
    await same(ref, ours, "catalog_set", f"b-{unique}", b"{}")
    await same(ref, ours, "catalog_set", f"b-{unique}", b'{"v": 2}')
    await same(ref, ours, "catalog_get", f"a-{unique}")
    await same(ref, ours, "catalog_get", f"b-{unique}")
    await same(ref, ours, "catalog_all")
