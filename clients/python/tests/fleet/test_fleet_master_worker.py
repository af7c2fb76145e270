"""fleet-framework's own master and worker, unchanged, on a ``switchyard+`` backend URL.

The master is ``fleet.master.create_app(backend_url)`` served by uvicorn on a free port (its
startup publishes the catalog and starts the reservation sweeper); the worker is
``fleet.worker.Agent(..., redis_url=backend_url)`` as ``fleet worker --backend-url`` builds it:
it registers over the master's WebSocket, polls its config, and its slots reserve, ack, nack and
dead-letter tasks and use KV, counters, a lock, a pool and the event bus through the backend its
``SlotRunner`` gets from fleet's ``backend_from_url``. Everything is checked through the master's
HTTP API, as an operator sees it.

Not exercised here: fleet's browser pool and anti-bot helpers (``fleet_browser``,
``fleet_cloudflare``: they need Chrome and DrissionPage), and proxy providers (network
services). Neither touches the backend.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
import uvicorn
from fleet.core.automation import BatchAutomation, Task, register
from fleet.core.config import BaseConfig
from fleet.core.context import Context
from fleet.core.contract import Pool
from fleet.core.events import EventBus
from fleet.core.primitives import PoolHandle
from fleet.core.protocol import PROTOCOL_VERSION, Hardware, Register, Stats
from fleet.master import create_app, ws_router
from fleet.worker import Agent
from pydantic import BaseModel
from switchyard.fleet import SwitchyardBackend
from sy_fleet_helpers import DB_MASTER, flush_db, redis_db_url

AT = "sy_echo"
ADMIN = "sy-admin-token"
WORKER = "sy-worker-token"


class EchoConfig(BaseConfig):
    pass


class EchoTask(BaseModel):
    text: str
    fail_times: int = 0


class EchoOutput(BaseModel):
    id: str
    text: str
    tries: int
    token: str | None


class Token(BaseModel):
    value: str


class TokenTags(BaseModel):
    kind: str


HARDWARE = Hardware(cores=2, ram_gb=4, hostname="sy-test", kernel="6")
TOKENS = Pool("sy_echo_tokens", payload=Token, tags=TokenTags)


@register(AT)
class Echo(BatchAutomation[EchoConfig]):
    """Upper-cases text; fails the first ``fail_times`` tries of a task."""

    Config = EchoConfig
    TaskPayload = EchoTask
    Output = EchoOutput
    Pools: ClassVar[dict[str, Pool]] = {"tokens": TOKENS}

    async def run_one(self, task: Task, ctx: Context[EchoConfig]) -> None:
        payload: EchoTask = task.payload  # type: ignore[assignment]
        tries = await ctx.counter(f"sy_echo:tries:{task.id}").incr()
        if tries <= payload.fail_times:
            raise RuntimeError(f"planned failure {tries} of {payload.fail_times}")
        async with ctx.lock("sy_echo_lock", hold_seconds=10, wait_seconds=10) as held:
            assert held
            await ctx.counter("sy_echo:done").incr()
        async with ctx.pool(TOKENS).where(kind="api").claim(hold_seconds=10) as token:
            used = token.payload.value if token is not None else None
        text = payload.text.upper()
        await ctx.kv("sy_echo_results").set(task.id, {"text": text, "tries": tries, "worker": ctx.worker_id})
        await ctx.events.publish("sy_echo_done", {"id": task.id})
        await ctx.emit(EchoOutput(id=task.id, text=text, tries=tries, token=used))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def eventually(check: Callable[[], Awaitable[Any]], what: str, timeout: float = 30.0) -> Any:
    """Polls ``check`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout} s (last: {last!r})")


# Redis (shared with Python fleet services) and SQLite (the embedded default); the protocol tests
# cover PostgreSQL method by method.
@pytest.fixture(params=["redis", "sqlite"])
async def backend_url(request: pytest.FixtureRequest, tmp_path: Path, unique: str) -> str:
    if request.param == "redis":
        url = redis_db_url(request.getfixturevalue("redis_url"), DB_MASTER)
        await flush_db(url)
        return "switchyard+" + url
    return f"switchyard+sqlite://{tmp_path / 'fleet.db'}"


@pytest.fixture
def tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEET_ADMIN_TOKEN", ADMIN)
    monkeypatch.setenv("FLEET_WORKER_TOKEN", WORKER)
    for name in (
        "FLEET_WORKER_TOKENS",
        "FLEET_TOKEN_SCOPES",
        "FLEET_SUBMIT_RPS_PER_TOKEN",
        "FLEET_WORKER_IDLE_TTL_SECONDS",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def master(backend_url: str, fleet_entry_points: None, tokens: None) -> AsyncIterator[tuple[str, Any]]:
    """fleet's master app on ``backend_url``, served on a free port: ``(base URL, app)``."""
    app = create_app(backend_url)
    assert isinstance(app.state.backend, SwitchyardBackend)
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", timeout_graceful_shutdown=3
        )
    )
    serving = asyncio.create_task(server.serve())
    await eventually(lambda: _now(server.started), "uvicorn started", timeout=15)
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, timeout=15)
        await app.state.backend.aclose()


async def test_master_and_worker_run_tasks_on_switchyard(master: tuple[str, Any], backend_url: str) -> None:
    base, app = master
    master_backend: SwitchyardBackend = app.state.backend
    observer = SwitchyardBackend(backend_url)  # an operator's own view of the same store
    http = httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=15)

    # The startup hook published the catalog through the backend.
    doc = json.loads(await eventually(lambda: master_backend.catalog_get(AT), "catalog entry"))
    assert doc["type"] == AT and doc["kind"] == "BatchAutomation" and "tokens" in doc["pools"]
    assert (await http.get(f"/api/v1/catalog/{AT}")).json()["queue"]["name"] == AT

    # Two pool items the slots claim (put through fleet's own PoolHandle on the master's backend).
    pool = PoolHandle(TOKENS, master_backend)
    for value in ("tok-a", "tok-b"):
        await pool.put(payload=Token(value=value), tags=TokenTags(kind="api"))
    inspected = (await http.get(f"/api/v1/pools/{TOKENS.name}")).json()
    assert inspected["size"] == 2 and {i["payload"]["value"] for i in inspected["items"]} == {"tok-a", "tok-b"}

    # Events the slots publish (SQLite delivers events within one backend object only, so the
    # observer sees them on Redis and PostgreSQL).
    seen_events: list[dict[str, Any]] = []

    async def listen() -> None:
        async for event in EventBus(observer.r).subscribe("sy_echo_done"):  # type: ignore[arg-type]
            seen_events.append(event)

    listener = asyncio.create_task(listen())

    # A worker that died holding a task: the master's sweeper returns it after its visibility.
    crashed = SwitchyardBackend(backend_url)
    crash_id = "sy-crashed-task"
    crash_body = json.dumps({"id": crash_id, "payload": {"text": "swept"}, "attempt": 0, "submitted_at": time.time()})
    await crashed.queue_push(AT, crash_body.encode())
    assert await crashed.queue_reserve(AT, 1, 1) == crash_body.encode()
    await crashed.aclose()

    agent = Agent(automation_type=AT, worker_id="w1", master_url=base, worker_token=WORKER, redis_url=backend_url)
    running = asyncio.create_task(agent.run())
    try:
        # The worker registers over the WebSocket.
        worker_url = f"/api/v1/automations/{AT}/workers/w1"
        record = await eventually(lambda: _json_if_ok(http.get(worker_url)), "worker registered")
        assert record["hardware"]["cores"] >= 1 and record["config_gen"] == 0 and record["state"] == "IDLE"

        # The operator enables two slots; the master pushes ConfigChanged, the worker applies it.
        patched = await http.patch(f"{worker_url}/config", json={"enabled": True, "slots": 2, "max_attempts": 3})
        assert patched.status_code == 200, patched.text
        assert patched.json()["config_gen"] == 1

        submitted: dict[str, str] = {}
        for text, extra in [
            ("alpha", {}),
            ("beta", {"priority": 1}),
            ("gamma", {"priority": -1}),
            ("delta", {"ttl_seconds": 600}),
            ("explicit", {"task_id": "sy-explicit-id"}),
        ]:
            r = await http.post(f"/api/v1/automations/{AT}/tasks", json={"payload": {"text": text}, **extra})
            assert r.status_code == 200 and r.json()["queued"] is True, r.text
            submitted[r.json()["task_id"]] = text.upper()
        assert "sy-explicit-id" in submitted
        once = {"payload": {"text": "idem"}, "idempotency_key": "k-1"}
        first = (await http.post(f"/api/v1/automations/{AT}/tasks", json=once)).json()
        again = (await http.post(f"/api/v1/automations/{AT}/tasks", json=once)).json()
        assert first["queued"] is True and again == {"task_id": first["task_id"], "queued": False, "duplicate": True}
        submitted[first["task_id"]] = "IDEM"
        retried = (
            await http.post(f"/api/v1/automations/{AT}/tasks", json={"payload": {"text": "retry", "fail_times": 1}})
        ).json()
        submitted[retried["task_id"]] = "RETRY"
        doomed = (
            await http.post(
                f"/api/v1/automations/{AT}/tasks",
                json={"payload": {"text": "doomed", "fail_times": 99}, "max_attempts": 2},
            )
        ).json()["task_id"]
        bad = await http.post(f"/api/v1/automations/{AT}/tasks", json={"payload": {"nope": 1}})
        assert bad.status_code == 422

        # Every task runs: its output reaches the master's stream, its result the KV. The crashed
        # task comes back after the sweeper's next pass (every 10 s).
        submitted[crash_id] = "SWEPT"
        out_len = f"/api/v1/automations/{AT}/output/length"
        await eventually(
            lambda: _value(http.get(out_len), lambda j: j["length"] >= len(submitted)), "all outputs", timeout=45
        )
        outputs = (await http.get(f"/api/v1/automations/{AT}/output/peek", params={"n": 100})).json()
        by_id = {o["payload"]["id"]: o["payload"] for o in outputs}
        assert {k: v["text"] for k, v in by_id.items()} == submitted
        assert by_id[retried["task_id"]]["tries"] == 2
        assert all(o["payload"]["token"] in ("tok-a", "tok-b") for o in outputs)
        assert {o["slot_id"] for o in outputs} <= {0, 1}
        for task_id, text in submitted.items():
            stored = json.loads(await observer.kv_get("sy_echo_results", task_id) or b"null")
            assert stored["text"] == text and stored["worker"] == "w1"
        assert await observer.counter_get("sy_echo:done") == len(submitted)

        # The doomed task is retried once (max_attempts 2), then dead-lettered.
        dead = await eventually(
            lambda: _value(http.get(f"/api/v1/automations/{AT}/dead"), lambda j: j["length"] == 1 and j), "DLQ"
        )
        assert dead["items"][0]["id"] == doomed and dead["items"][0]["attempt"] == 2
        queue = (await http.get(f"/api/v1/automations/{AT}/queue")).json()
        assert queue == {"length": 0, "items": []}
        assert await observer.queue_sweep_expired(AT) == 0
        stats = await (await observer.native()).queue_stats(AT)
        assert (stats["waiting"], stats["in_flight"], stats["scheduled"], stats["dead"]) == (0, 0, 0, 1)
        if not backend_url.startswith("switchyard+sqlite"):
            await eventually(lambda: _now(len(seen_events) >= len(submitted)), "events")
            assert {e["id"] for e in seen_events} == set(submitted)

        # State and stats reach the master (the worker reports every 15 s).
        running_record = await eventually(
            lambda: _value(http.get(worker_url), lambda j: j["state"] == "RUNNING" and j),
            "RUNNING state",
            timeout=30,
        )
        assert running_record["config"] == {"enabled": True, "slots": 2, "max_attempts": 3}
        assert running_record["last_seen"] > time.time() - 60 and running_record["last_error"] is None
        listed = (await http.get(f"/api/v1/automations/{AT}/workers")).json()
        assert [w["worker_id"] for w in listed] == ["w1"]
        history = (await http.get(f"{worker_url}/stats")).json()
        assert history and history[-1]["slots"] == 2
        metrics = (await http.get("/metrics")).text
        assert f'fleet_queue_size{{automation_type="{AT}"}} 0.0' in metrics
        assert f'fleet_queue_dlq_length{{automation_type="{AT}"}} 1.0' in metrics
        assert f'fleet_workers_total{{automation_type="{AT}",state="RUNNING"}} 1' in metrics
        assert f'fleet_pool_size{{pool="{TOKENS.name}"}} 2.0' in metrics

        # Reading the output stream through the API pops it.
        popped = (await http.post(f"/api/v1/automations/{AT}/output/pop", json={"n": 3})).json()
        assert len(popped) == 3
        assert (await http.get(out_len)).json()["length"] == len(submitted) - 3
        assert (await http.delete(f"/api/v1/automations/{AT}/dead")).json() == {"cleared": 1}

        # Drain: the worker finishes what it holds and stops.
        assert (await http.post(f"{worker_url}/drain")).json() == {"worker_id": "w1", "drain": "requested"}
        await asyncio.wait_for(running, timeout=20)
        assert (await http.delete(worker_url)).json() == {"worker_id": "w1", "removed": True}
        assert (await http.get(worker_url)).status_code == 404
    finally:
        await agent.stop()
        if not running.done():
            await asyncio.wait_for(running, timeout=20)
        listener.cancel()
        await http.aclose()
        await observer.aclose()


async def _now(value: Any) -> Any:
    return value


async def _json_if_ok(response: Awaitable[httpx.Response]) -> Any:
    r = await response
    return r.json() if r.status_code == 200 else None


async def _value(response: Awaitable[httpx.Response], pick: Callable[[Any], Any]) -> Any:
    r = await response
    assert r.status_code == 200, r.text
    return pick(r.json())


async def test_master_shows_the_stats_a_worker_reports(
    backend_url: str, fleet_entry_points: None, tokens: None
) -> None:
    """What the master does with a worker's Stats frame (``ws_router._handle``: the stats document
    and the history), read back through its API as ``current_stats`` and ``/metrics``."""
    app = create_app(backend_url)
    backend: SwitchyardBackend = app.state.backend
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://master", headers={"Authorization": f"Bearer {ADMIN}"}
    ) as http:
        try:
            await ws_router._handle(
                Register(worker_id="w9", automation_type=AT, protocol_version=PROTOCOL_VERSION, hardware=HARDWARE),
                app.state.store,
                backend,
                AT,
                "w9",
                None,  # type: ignore[arg-type]
            )
            stats = Stats(slots=2, cpu_pct=3.5, rss_mb=42, ts=int(time.time()), metrics={}, per_slot=[])
            await ws_router._handle(stats, app.state.store, backend, AT, "w9", None)  # type: ignore[arg-type]
            history = (await http.get(f"/api/v1/automations/{AT}/workers/w9/stats")).json()
            assert [frame["rss_mb"] for frame in history] == [42]
            record = (await http.get(f"/api/v1/automations/{AT}/workers/w9")).json()
            assert record["current_stats"] == stats.model_dump()
            metrics = (await http.get("/metrics")).text
            assert f'fleet_worker_rss_mb{{automation_type="{AT}",worker_id="w9"}} 42.0' in metrics
        finally:
            await backend.aclose()


async def test_dead_letter_replay_and_task_id_reuse_through_the_master(
    backend_url: str, fleet_entry_points: None, tokens: None
) -> None:
    """fleet's master replays dead letters with ``dlq_pop`` + ``queue_push`` and accepts a
    client's ``task_id`` again once the task is done."""
    app = create_app(backend_url)
    backend: SwitchyardBackend = app.state.backend
    tasks = f"/api/v1/automations/{AT}/tasks"
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://master", headers={"Authorization": f"Bearer {ADMIN}"}
    ) as http:
        try:
            r = await http.post(tasks, json={"payload": {"text": "x"}, "task_id": "sy-replayed"})
            assert r.json()["queued"] is True
            # A worker exhausts the task's retries, as fleet's SlotRunner does.
            body = await backend.queue_reserve(AT, 1, 30)
            assert body is not None
            envelope = {**json.loads(body), "attempt": 1, "max_attempts": 1}
            await backend.queue_dead(AT, json.dumps(envelope).encode())
            assert await backend.queue_ack(AT, "sy-replayed") is True
            assert (await http.get(f"/api/v1/automations/{AT}/dead")).json()["length"] == 1
            r = await http.post(f"/api/v1/automations/{AT}/dead/replay", json={"n": 1})
            assert r.status_code == 200 and r.json() == {"replayed": 1}, r.text
            queue = (await http.get(f"/api/v1/automations/{AT}/queue")).json()
            assert queue["length"] == 1 and queue["items"][0]["attempt"] == 0
            # It runs again and completes; then its id is taken again by a new submission.
            assert await backend.queue_reserve(AT, 1, 30) is not None
            assert await backend.queue_ack(AT, "sy-replayed") is True
            r = await http.post(tasks, json={"payload": {"text": "again"}, "task_id": "sy-replayed"})
            assert r.status_code == 200 and r.json()["queued"] is True, r.text
        finally:
            await backend.aclose()
