"""The queue verbs one by one against the embedded default: submit and its options, records by
id (long polls included), cancels, counts, listings, dead letters, pause, rate limits, retention,
and the raw worker verbs with the errors that say a delivery is over."""

from __future__ import annotations

import asyncio
import time

import pytest
from switchyard.gateway import (
    CancelledTaskError,
    Client,
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    ReceiptLostError,
    TooLargeError,
)


async def test_submit_options_records_and_long_polls(client: Client) -> None:
    q = client.queue("records")
    first = await q.submit({"n": 1}, id="a", idempotency_key="once")
    assert first == {"queue": "records", "id": "a", "duplicate": False}
    again = await q.submit({"n": 1}, idempotency_key="once")
    assert again["duplicate"] is True and again["id"] == "a"
    generated = await q.submit([1, 2, 3])
    assert len(generated["id"]) >= 16
    with pytest.raises(ConflictError) as exists:
        await q.submit({"n": 2}, id="a")
    assert exists.value.code == "task_exists"
    await q.submit({"n": 3}, id="urgent", priority="high")
    await q.submit({"n": 4}, id="later", delay_seconds=3600)
    await q.submit({"n": 5}, id="at", run_at=time.time() + 3600)

    stats = await q.stats()
    assert stats["queue"] == "records"
    assert stats["waiting"] == 3
    assert stats["tiers"] == {"high": 1, "normal": 2, "low": 0}
    assert stats["scheduled"] == 2
    assert stats["paused"] is False
    waiting = await q.waiting(limit=10)
    assert len(waiting["tasks"]) == 3
    assert "records" in (await client.queues())["queues"]

    record = await q.task("a")
    assert record["state"] == "waiting"
    assert record["attempt"] == 0
    assert record["result"] is None
    assert (await q.task("later"))["state"] == "scheduled"
    with pytest.raises(NotFoundError) as missing:
        await q.task("nope")
    assert missing.value.code == "no_task"

    # The high tier is reserved first.
    [urgent] = await q.reserve(visibility_seconds=30)
    assert urgent["id"] == "urgent"
    assert urgent["priority"] == "high"
    assert urgent["attempt"] == 1

    # A long poll answers when the task ends; a wait that runs out answers the record as it stands.
    polling = asyncio.create_task(q.task("urgent", wait_seconds=10))
    await asyncio.sleep(0.2)
    assert not polling.done()
    await q.ack(urgent["receipt"], {"done": True})
    ended = await asyncio.wait_for(polling, 5)
    assert ended["state"] == "completed"
    assert ended["result"] == {"done": True}
    began = time.monotonic()
    still = await q.wait("a", timeout=1)
    assert still["state"] == "waiting"
    assert 0.9 <= time.monotonic() - began < 5


async def test_cancels(client: Client) -> None:
    q = client.queue("cancels")
    for i in range(5):
        await q.submit({"i": i}, id=f"c{i}")
    assert await q.cancel("c0") == {"outcome": "cancelled", "state": "cancelled"}
    [running] = await q.reserve()
    assert running["id"] == "c1"
    assert await q.cancel("c1") == {"outcome": "cancel_requested", "state": "running"}
    assert (await q.task("c1"))["cancel_requested"] is True
    # The holder learns it from its next extend or progress, and its end is refused.
    with pytest.raises(CancelledTaskError) as told:
        await q.extend(running["receipt"], 30)
    assert told.value.status == 409 and told.value.code == "cancelled"
    with pytest.raises(CancelledTaskError):
        await q.progress(running["receipt"], {"step": 1})
    with pytest.raises(CancelledTaskError):
        await q.nack(running["receipt"], reason="cancelled")
    assert (await q.task("c1"))["state"] == "cancelled"
    assert await q.cancel("c1") == {"outcome": "finished", "state": "cancelled"}
    with pytest.raises(NotFoundError):
        await q.cancel("nope")

    answer = await q.cancel_many(["c2", "nope", "c3"])
    assert [(r["id"], r["outcome"]) for r in answer.get("results") or []] == [
        ("c2", "cancelled"),
        ("nope", "unknown"),
        ("c3", "cancelled"),
    ]
    assert (await q.purge()).get("purged") == 1
    stats = await q.stats()
    assert stats["waiting"] == 0
    assert stats.get("cancelled") == 5


async def test_the_raw_worker_verbs(client: Client) -> None:
    q = client.queue("verbs")
    for i in range(4):
        await q.submit({"i": i}, id=f"w{i}", max_attempts=2)
    reserved = await q.reserve(max_tasks=4, visibility_seconds=30)
    assert [t["id"] for t in reserved] == ["w0", "w1", "w2", "w3"]
    assert all(t["max_attempts"] == 2 and t["visible_until"] > time.time() for t in reserved)
    w0, w1, w2, w3 = reserved

    await q.progress(w0["receipt"], {"done": 40, "of": 100})
    await q.extend(w0["receipt"], 60)
    in_flight = await q.in_flight()
    assert {t.get("id") for t in in_flight["in_flight"]} == {"w0", "w1", "w2", "w3"}
    [progressed] = [t for t in in_flight["in_flight"] if t.get("id") == "w0"]
    assert progressed["progress"] == {"done": 40, "of": 100}
    with pytest.raises(InvalidRequestError) as too_much:
        await q.progress(w0["receipt"], {"blob": "x" * 70_000})
    assert too_much.value.status == 422
    with pytest.raises(TooLargeError) as too_large:
        await q.submit({"blob": "x" * 3_000_000})
    assert too_large.value.status == 413

    acked = await q.ack_many([{"receipt": w0["receipt"], "result": 0}, {"receipt": w1["receipt"]}])
    assert [r["ok"] for r in acked["results"]] == [True, True]
    # A receipt ends one delivery only: a second ack is a lost receipt, alone or in a batch.
    with pytest.raises(ReceiptLostError) as lost:
        await q.ack(w0["receipt"])
    assert lost.value.code == "receipt_not_current"
    again = await q.ack_many([{"receipt": w1["receipt"]}])
    assert again["results"][0]["ok"] is False
    assert again["results"][0].get("error") == "receipt_not_current"
    assert again["results"][0].get("status") == 409

    nacked = await q.nack(w2["receipt"], reason="flaky", delay_seconds=0)
    assert nacked == {"ok": True, "dead_lettered": False, "attempt": 1, "max_attempts": 2}
    [retry] = await q.reserve(wait_seconds=5)
    assert retry["id"] == "w2"
    assert retry["attempt"] == 2
    last_error = retry.get("last_error")
    assert last_error is not None and last_error["message"] == "flaky" and last_error["attempt"] == 1
    last = await q.nack(retry["receipt"], reason="still flaky")
    assert last["dead_lettered"] is True
    await q.fail(w3["receipt"], "hopeless")
    assert (await q.task("w3"))["last_error"] == "hopeless"

    dead = await q.dead_letters()
    assert dead["total"] == 2
    refs = {str(letter["id"]): str(letter["ref"]) for letter in dead["dead_letters"]}
    assert set(refs) == {"w2", "w3"}
    requeued = await q.requeue(refs=[refs["w3"], "bm90LWEtcmVm"])
    assert requeued["requeued"] == 1
    assert requeued["missing"] == ["bm90LWEtcmVm"]
    assert (await q.task("w3"))["state"] == "waiting"
    assert (await q.requeue())["requeued"] == 1
    assert (await q.dead_letters())["total"] == 0

    with pytest.raises(InvalidRequestError) as invalid:
        await q.reserve(max_tasks=101)
    assert invalid.value.status == 422
    assert invalid.value.field == "max"


async def test_pause_rate_limit_and_retention(client: Client) -> None:
    q = client.queue("controls")
    await q.submit({"n": 1}, id="p1")
    assert await q.pause() == {"queue": "controls", "paused": True, "changed": True}
    assert (await q.pause())["changed"] is False
    assert await q.reserve() == []
    assert (await q.stats())["paused"] is True
    assert (await q.resume())["paused"] is False
    [task] = await q.reserve()
    await q.ack(task["receipt"])

    limited = await q.set_rate_limit(5, 60)
    assert limited.get("rate_limit") == {"max": 5, "per_seconds": 60.0}
    assert (await q.clear_rate_limit()).get("rate_limit") is None

    retention = await q.retention()
    assert set(retention) == {"completed", "failed", "events"}
    changed = await q.set_retention(completed={"count": 10, "age_seconds": 60})
    assert changed["completed"] == {"count": 10, "age_seconds": 60.0}
    assert changed["failed"] == retention["failed"]
    with pytest.raises(InvalidRequestError):
        await q.set_retention(events={"count": 1, "age_seconds": 60})


async def test_schedules_and_the_worker_registry(client: Client) -> None:
    stored = await client.put_schedule(
        "nightly", cron="0 0 3 * * *", queue="reports", payload={"kind": "nightly"}, timezone="Europe/Paris"
    )
    assert stored["name"] == "nightly"
    assert stored["spec"]["cron"] == "0 0 3 * * *"
    assert stored["spec"]["queue"] == "reports"
    assert (await client.schedule("nightly"))["spec"]["payload"] == {"kind": "nightly"}
    assert [s["name"] for s in (await client.schedules())["schedules"]] == ["nightly"]
    with pytest.raises(InvalidRequestError):
        await client.put_schedule("broken", cron="not a cron", queue="reports")
    assert await client.delete_schedule("nightly") == {"name": "nightly", "deleted": True}
    assert (await client.delete_schedule("nightly"))["deleted"] is False
    with pytest.raises(NotFoundError):
        await client.schedule("nightly")
    assert (await client.workers())["workers"] == []
