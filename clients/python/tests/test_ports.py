"""The four ports opened by URL from Python, and the typed queue's worker loop, on real servers."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import switchyard
from switchyard.errors import ClosedError, ConfigError, InvalidInputError, UnavailableError
from switchyard.queue import Permanent, Queue, Task


@pytest.fixture(params=["sqlite", "redis", "postgres"])
def fleet_url(request: pytest.FixtureRequest, tmp_path: Path, unique: str) -> str:
    if request.param == "sqlite":
        return f"sqlite://{tmp_path / 'fleet.db'}"
    if request.param == "redis":
        return request.getfixturevalue("redis_url")
    return request.getfixturevalue("postgres_url") + f"?schema=sy_{unique}"


async def test_a_worker_runs_every_task_with_retries_results_and_dead_letters(fleet_url: str, unique: str) -> None:
    fleet = await switchyard.open_fleet_backend(fleet_url)
    queue = Queue(fleet, f"jobs-{unique}")
    ids = [await queue.push({"n": n}, max_attempts=2) for n in range(60)]
    seen: dict[str, list[int]] = {}

    async def handle(task: Task) -> object:
        seen.setdefault(task.id, []).append(task.attempt)
        n = task.payload["n"]
        if n % 10 == 3:
            raise Permanent(f"{n} is not allowed")
        if n % 10 == 7 and task.attempt == 1:
            raise RuntimeError("flaky once")
        await asyncio.sleep(0)
        return {"square": n * n}

    async with queue.worker(handle, concurrency=8, visibility_seconds=30) as worker:
        await asyncio.wait_for(worker.wait_idle(), 60)
    stats = worker.stats()
    assert stats["acked"] == 54 and stats["dead_lettered"] == 6 and stats["retried"] == 6, stats
    for n, task_id in enumerate(ids):
        record = await queue.get(task_id)
        assert record is not None
        if n % 10 == 3:
            assert record["state"] == "dead" and "not allowed" in (record["last_error"] or "")
            assert seen[task_id] == [1]
        else:
            assert (record["state"], record["result"]) == ("completed", {"square": n * n})
            assert seen[task_id] == ([1, 2] if n % 10 == 7 else [1])
    dead = await queue.dead_letters(100)
    assert sorted(d["payload"]["n"] for d in dead) == [3, 13, 23, 33, 43, 53]
    assert all("Permanent" in d["last_error"]["message"] for d in dead)
    fleet.close()


async def test_a_cancel_reaches_a_running_handler_and_the_task_is_never_retried(redis_url: str, unique: str) -> None:
    fleet = await switchyard.open_fleet_backend(redis_url)
    queue = Queue(fleet, f"cancel-{unique}")
    started = asyncio.Event()
    outcome: list[str] = []

    async def handle(task: Task) -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise

    task_id = await queue.push({"slow": True})
    async with queue.worker(handle, visibility_seconds=3) as worker:
        await asyncio.wait_for(started.wait(), 10)
        assert await queue.cancel(task_id) == "cancel_requested"
        for _ in range(100):
            record = await queue.get(task_id)
            if record and record["state"] == "cancelled":
                break
            await asyncio.sleep(0.1)
    assert outcome == ["cancelled"]
    assert (await queue.get(task_id) or {})["state"] == "cancelled"
    assert worker.stats()["cancelled"] == 1
    assert (await queue.stats())["waiting"] == 0


async def test_a_timeout_cancels_the_attempt_and_counts_it_failed(redis_url: str, unique: str) -> None:
    fleet = await switchyard.open_fleet_backend(redis_url)
    queue = Queue(fleet, f"timeout-{unique}")

    async def handle(task: Task) -> None:
        await asyncio.sleep(60)

    task_id = await queue.push({}, timeout_seconds=0.3, max_attempts=1)
    async with queue.worker(handle, visibility_seconds=5) as worker:
        await asyncio.wait_for(worker.wait_idle(), 20)
    record = await queue.get(task_id)
    assert record is not None and record["state"] == "dead"
    assert "timed out" in (record["last_error"] or "")
    assert worker.stats()["timed_out"] == 1


async def test_the_stream_bridge_replays_after_a_cursor_and_ends(redis_url: str, unique: str) -> None:
    for url in ("memory://", redis_url):
        bridge = await switchyard.open_stream_bridge(url, prefix=f"sy-test:{unique}")
        run = f"run-{unique}"
        ids = [await bridge.publish(run, "message", json.dumps({"i": i})) for i in range(5)]
        await bridge.publish_end(run)
        items = [item async for item in bridge.subscribe(run, last_event_id=ids[1])]
        assert [(i.kind, i.id) for i in items] == [("event", ids[2]), ("event", ids[3]), ("event", ids[4]), ("end", None)]
        assert [json.loads(i.data or "null") for i in items[:3]] == [{"i": 2}, {"i": 3}, {"i": 4}]
        assert await bridge.stream_exists(run)
        await bridge.cleanup(run)
        assert not await bridge.stream_exists(run)
        await bridge.aclose()
        with pytest.raises(ClosedError):
            await bridge.publish(run, "message", "{}")


async def test_the_checkpoint_cache_keeps_bytes_and_degrades_to_misses(redis_url: str, unique: str) -> None:
    cache = await switchyard.open_checkpoint_cache(redis_url)
    key = f"sy-test:{unique}:k"
    await cache.set_many([(key, "msgpack", b"\x00\xff raw")])
    assert await cache.get_many([key, key + "-absent"]) == {key: ("msgpack", b"\x00\xff raw")}
    assert cache.stats()["hits"] == 1 and cache.stats()["misses"] == 1
    dead = await switchyard.open_checkpoint_cache("redis://127.0.0.1:1/0")
    assert await dead.get_many([key]) == {}  # a failure is a miss, never an error
    await dead.aclose()
    await cache.aclose()


async def test_errors_say_what_to_do_and_are_the_builtin_classes_python_code_catches() -> None:
    with pytest.raises(ConfigError, match="use one of"):
        await switchyard.open_event_store("nosuch://x")
    with pytest.raises(UnavailableError, match="reachable") as refused:
        await switchyard.open_fleet_backend("redis://127.0.0.1:1/0")
    assert isinstance(refused.value, ConnectionError)
    store = await switchyard.open_event_store("memory://")
    with pytest.raises(InvalidInputError) as bad:
        await store.append(None, None, "r", ['{"kind": "text.delta"}'], "o")
    assert isinstance(bad.value, ValueError) and bad.value.field.startswith("payload")
    with pytest.raises(InvalidInputError, match="seconds"):
        opening = '{"kind": "run.started", "invocable": "a", "kind_of_invocable": "agent", "input": []}'
        await store.claim_start(None, None, "r", opening, "o", float("nan"))
    store.close()
    with pytest.raises(ClosedError, match="open a new one"):
        await store.read(None, None, "r")


def test_the_runtime_threads_come_from_the_environment_and_a_bad_value_names_the_fix() -> None:
    # A fresh interpreter each: the runtime is set up once, when the extension is imported.
    probe = (
        "import asyncio, switchyard\n"
        "async def main():\n"
        "    store = await switchyard.open_event_store('memory://')\n"
        "    await store.read(None, None, 'r')\n"
        "    print('ok')\n"
        "asyncio.run(main())\n"
    )

    def run(value: str | None) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ)
        env.pop("SWITCHYARD_RUNTIME_THREADS", None)
        if value is not None:
            env["SWITCHYARD_RUNTIME_THREADS"] = value
        return subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)

    for value in (None, "1", "4"):
        ran = run(value)
        assert ran.returncode == 0 and ran.stdout.strip() == "ok", (value, ran.stderr)
    for value in ("0", "many", "65"):
        ran = run(value)
        assert ran.returncode != 0, value
        assert "SWITCHYARD_RUNTIME_THREADS" in ran.stderr and "from 1 to 64" in ran.stderr, ran.stderr
        assert "unset it" in ran.stderr, ran.stderr
