"""Followers that outlive their connection: a run followed across a gateway restart on Redis
(every seq once), a silent gateway taken for dead after three missed heartbeats, a 429 waited
out for its ``Retry-After``, and a queue's end events resumed after the last id seen."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from gateway_support import Gateway, GatewayFactory, embedded_args, eventually, new_token, redis_args
from switchyard.gateway import (
    Client,
    NetworkError,
    QueueFrame,
    Reconnect,
    ReconnectInfo,
    RunEndFrame,
    RunEventFrame,
    RunFrame,
    ServiceUnavailableError,
    TaskContext,
    TaskEndFrame,
)

COMPLETED = {"kind": "run.completed", "output": [], "usage": {"input_tokens": 1, "output_tokens": 1, "usd": None}}


def start_on(start: GatewayFactory, args: list[str], listen: str, timeout: float = 10.0) -> Gateway:
    """Starts a gateway on ``listen``, retrying while the address is still taken."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return start(*args, listen=listen)
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def seqs(frames: list[RunFrame]) -> list[int]:
    return [f.data["seq"] for f in frames if isinstance(f, RunEventFrame)]


async def test_a_followed_run_resumes_across_a_gateway_restart_with_every_event_once(
    start: GatewayFactory, redis_url: str, unique: str
) -> None:
    args = redis_args(redis_url, unique)
    gateway = start(*args)
    async with Client(gateway.url) as client:
        await client.runs.start(run_id="long", session_id="r1", invocable="helper", kind_of_invocable="agent")
        frames: list[RunFrame] = []
        reconnects: list[ReconnectInfo] = []

        async def follow() -> None:
            async for frame in client.runs.follow(
                "long",
                session="r1",
                reconnect=Reconnect(initial_delay=0.05, max_delay=0.2),
                on_reconnect=reconnects.append,
            ):
                frames.append(frame)

        following = asyncio.create_task(follow())
        for i in range(5):
            await client.runs.append("long", {"kind": "text.delta", "message_id": "m", "text": f"a{i}"}, session="r1")
        await eventually(lambda: len(frames) == 6, "six frames before the restart")

        # A restart as a deployment does it: the old process is told to stop, and a new one takes
        # its address while the old drains (ending its streams without an end frame).
        old = gateway
        old.terminate()
        gateway = await asyncio.to_thread(start_on, start, args, old.listen)
        for i in range(5):
            await client.runs.append("long", {"kind": "text.delta", "message_id": "m", "text": f"b{i}"}, session="r1")
        await client.runs.append("long", COMPLETED, session="r1")
        await asyncio.wait_for(following, 15)

    assert reconnects, "the follower reconnected"
    assert all(isinstance(r.error, NetworkError) for r in reconnects)
    assert seqs(frames) == list(range(12)), "every seq once, in order"
    assert frames[-1] == RunEndFrame()


async def test_a_silent_gateway_is_left_after_three_missed_heartbeats_and_the_stream_resumed(
    start: GatewayFactory, tmp_path: Path
) -> None:
    gateway = start(*embedded_args(tmp_path, "--heartbeat-secs", "1"))
    async with Client(gateway.url, timeout=1.5) as client:
        await client.runs.start(run_id="quiet", invocable="helper", kind_of_invocable="agent")
        frames: list[RunFrame] = []
        reconnects: list[ReconnectInfo] = []

        async def follow() -> None:
            async for frame in client.runs.follow(
                "quiet",
                reconnect=Reconnect(initial_delay=0.05, max_delay=0.2, idle_timeout=2.5),
                on_reconnect=reconnects.append,
            ):
                frames.append(frame)

        following = asyncio.create_task(follow())
        await client.runs.append("quiet", {"kind": "text.delta", "message_id": "m", "text": "before"})
        await eventually(lambda: len(frames) == 2, "two frames before the silence")
        # Heartbeats keep a quiet stream alive: nothing is reconnected past the idle timeout.
        await asyncio.sleep(3.0)
        assert reconnects == []

        gateway.freeze()
        try:
            await eventually(lambda: any(r.error.code == "idle" for r in reconnects), "the silence noticed", timeout=8)
        finally:
            gateway.thaw()
        await client.runs.append("quiet", {"kind": "text.delta", "message_id": "m", "text": "after"})
        await client.runs.append("quiet", COMPLETED)
        await asyncio.wait_for(following, 15)

    assert seqs(frames) == [0, 1, 2, 3], "every seq once, in order"
    assert frames[-1] == RunEndFrame()


async def test_a_429_is_retried_after_its_retry_after(
    start: GatewayFactory, switchyard_bin: str, tmp_path: Path
) -> None:
    secret, entry = new_token(switchyard_bin, tmp_path, "one-stream", ["--namespace", "*", "--queue", "*"])
    (tmp_path / "tokens.toml").write_text(entry)
    (tmp_path / "config.toml").write_text("[limits]\nmax_streams_per_token = 1\n")
    gateway = start(
        *embedded_args(tmp_path, "--auth", str(tmp_path / "tokens.toml"), "--config", str(tmp_path / "config.toml"))
    )
    async with Client(gateway.url, token=secret) as client:
        await client.runs.start(run_id="busy", invocable="helper", kind_of_invocable="agent")
        first: list[RunFrame] = []
        second: list[RunFrame] = []
        refusals: list[ReconnectInfo] = []

        async def follow_first() -> None:
            async for frame in client.runs.follow("busy"):
                first.append(frame)

        async def follow_second() -> None:
            async for frame in client.runs.follow(
                "busy", reconnect=Reconnect(initial_delay=0.01, max_delay=0.02), on_reconnect=refusals.append
            ):
                second.append(frame)

        a = asyncio.create_task(follow_first())
        await eventually(lambda: len(first) == 1, "the first stream open")
        began = time.monotonic()
        b = asyncio.create_task(follow_second())
        await eventually(lambda: len(refusals) >= 2, "the second stream refused twice")
        # Waited out the Retry-After (1 s), not the 10 ms backoff.
        assert time.monotonic() - began >= 1.0
        assert len(refusals) <= 3
        for refusal in refusals:
            assert isinstance(refusal.error, ServiceUnavailableError)
            assert refusal.error.status == 429
            assert refusal.error.code == "stream_quota_exceeded"
            assert refusal.error.retry_after == 1
            assert refusal.delay >= 1
        await client.runs.append("busy", {"kind": "text.delta", "message_id": "m", "text": "x"})
        await client.runs.append("busy", COMPLETED)
        await asyncio.wait_for(a, 10)
        # The first stream ended and gave its slot back: the second one gets in and replays it all.
        await asyncio.wait_for(b, 10)
    assert seqs(first) == seqs(second) == [0, 1, 2]


async def test_a_queues_end_events_resume_after_the_last_id_seen(
    start: GatewayFactory, redis_url: str, unique: str
) -> None:
    gateway = start(*redis_args(redis_url, unique))
    async with Client(gateway.url) as client:
        q = client.queue("ends")
        seen: list[QueueFrame] = []

        async def follow() -> None:
            async for frame in q.events():
                seen.append(frame)

        following = asyncio.create_task(follow())
        # Without a cursor only new ends are sent: give the stream a moment to open.
        await asyncio.sleep(0.3)
        for i in range(4):
            await q.submit({"i": i}, id=f"e{i}")

        async def handler(task: TaskContext[dict[str, int]]) -> int:
            return task.payload["i"]

        async with q.worker(handler, wait=1):
            await eventually(lambda: len(seen) == 4, "four ends")
        following.cancel()
        ends = [f for f in seen if isinstance(f, TaskEndFrame)]
        assert [(f.event, f.data["task_id"], f.data["result"]) for f in ends] == [
            ("completed", f"e{i}", i) for i in range(4)
        ]
        assert all(f.id == f.data["cursor"] for f in ends)

        # Resumed from the second end: exactly the two after it.
        resumed: list[QueueFrame] = []
        async with q.events(last_event_id=ends[1].id) as stream:
            async for frame in stream:
                resumed.append(frame)
                if len(resumed) == 2:
                    break
        assert [f.data["task_id"] if isinstance(f, TaskEndFrame) else f.type for f in resumed] == ["e2", "e3"]

        # The same log, read as pages.
        page = await q.events_page(after=ends[0].id, limit=2)
        assert [e["task_id"] for e in page["events"]] == ["e1", "e2"]
        assert page["gap"] is False
        rest = await q.events_page(after=page["cursor"])
        assert [e["task_id"] for e in rest["events"]] == ["e3"]
