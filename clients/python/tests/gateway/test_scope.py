"""Tokens: a client scoped to some namespaces and queues is refused outside them with typed errors
that never echo its secret, and a token-less follower with a stream ticket reads one run's stream."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from gateway_support import Gateway, GatewayFactory, embedded_args, eventually, new_token
from switchyard.gateway import (
    Client,
    ForbiddenError,
    GatewayError,
    RunEndFrame,
    RunEventFrame,
    RunFrame,
    UnauthorizedError,
)

COMPLETED = {"kind": "run.completed", "output": [], "usage": {"input_tokens": 0, "output_tokens": 0, "usd": None}}


@dataclass
class Scoped:
    gateway: Gateway
    tenant_a: str
    reader: str
    reader_entry: str


@pytest.fixture
def scoped(start: GatewayFactory, switchyard_bin: str, tmp_path: Path) -> Scoped:
    tenant_a, a = new_token(
        switchyard_bin,
        tmp_path,
        "tenant-a",
        ["--namespace", "tenant-a*", "--queue", "jobs-a*", "--right", "read", "--right", "write"],
    )
    reader, ro = new_token(
        switchyard_bin, tmp_path, "reader", ["--namespace", "tenant-a", "--queue", "*", "--right", "read"]
    )
    (tmp_path / "tokens.toml").write_text(a + "\n" + ro)
    gateway = start(*embedded_args(tmp_path, "--auth", str(tmp_path / "tokens.toml")))
    return Scoped(gateway, tenant_a, reader, ro)


def assert_secret_not_echoed(error: GatewayError, secret: str) -> None:
    assert secret not in str(error)
    assert secret not in repr(error)
    assert secret not in error.message
    assert secret not in repr(error.body)


async def test_a_token_scoped_client_is_refused_outside_its_scope(scoped: Scoped) -> None:
    async with Client(scoped.gateway.url, token=scoped.tenant_a) as a:
        assert scoped.tenant_a not in repr(a)
        await a.runs.start(run_id="r1", namespace="tenant-a", invocable="x", kind_of_invocable="agent")
        await a.queue("jobs-a1").submit({"ok": True})

        refusals: list[tuple[str, Callable[[], Awaitable[object]]]] = [
            (
                "another namespace's run",
                lambda: a.runs.start(run_id="r2", namespace="tenant-b", invocable="x", kind_of_invocable="agent"),
            ),
            ("another namespace's list", lambda: a.runs.list(namespace="tenant-b")),
            ("another queue's submit", lambda: a.queue("jobs-b1").submit({"ok": False})),
            ("another queue's stats", lambda: a.queue("jobs-b1").stats()),
            ("another queue's reserve", lambda: a.queue("jobs-b1").reserve()),
        ]
        for what, call in refusals:
            with pytest.raises(ForbiddenError) as refused:
                await call()
            assert refused.value.status == 403, what
            assert refused.value.request_id, what
            assert not refused.value.retryable
            assert_secret_not_echoed(refused.value, scoped.tenant_a)

        # The queue list shows only the queues of its scope.
        assert "jobs-b1" not in (await a.queues())["queues"]

    # A read-only token reads, but cannot write.
    async with Client(scoped.gateway.url, token=scoped.reader) as ro:
        assert (await ro.runs.get("r1", namespace="tenant-a"))["status"] == "running"
        with pytest.raises(ForbiddenError) as refused:
            await ro.queue("jobs-a1").submit({})
        assert_secret_not_echoed(refused.value, scoped.reader)

    # No token, or a wrong one: 401.
    async with Client(scoped.gateway.url) as anonymous:
        with pytest.raises(UnauthorizedError) as unauthenticated:
            await anonymous.runs.list()
        assert unauthenticated.value.status == 401
    wrong = "sy_" + "0" * 64
    async with Client(scoped.gateway.url, token=wrong) as stranger:
        with pytest.raises(UnauthorizedError) as unknown:
            await stranger.runs.list()
        assert_secret_not_echoed(unknown.value, wrong)


async def test_a_stream_ticket_lets_a_token_less_follower_read_one_run_and_only_that_run(scoped: Scoped) -> None:
    async with Client(scoped.gateway.url, token=scoped.tenant_a) as a, Client(scoped.gateway.url) as page:
        await a.runs.start(run_id="t1", namespace="tenant-a", invocable="x", kind_of_invocable="agent")
        await a.runs.append("t1", {"kind": "text.delta", "message_id": "m", "text": "hi"}, namespace="tenant-a")
        await a.runs.append("t1", COMPLETED, namespace="tenant-a")

        # What a party without the token does: it asks a holder of the token for a ticket each time.
        asked = 0

        async def ticket() -> str:
            nonlocal asked
            asked += 1
            issued = await a.runs.stream_ticket("t1", namespace="tenant-a")
            assert issued["expires_in"] > 0
            return issued["ticket"]

        frames: list[RunFrame] = [f async for f in page.runs.follow("t1", namespace="tenant-a", ticket=ticket)]
        assert asked == 1
        assert [f.data["kind"] if isinstance(f, RunEventFrame) else f.type for f in frames] == [
            "run.started",
            "text.delta",
            "run.completed",
            "end",
        ]

        # A ticket opens t1's stream only.
        await a.runs.start(run_id="t2", namespace="tenant-a", invocable="x", kind_of_invocable="agent")
        issued = await a.runs.stream_ticket("t1", namespace="tenant-a")
        with pytest.raises(UnauthorizedError):
            async for _ in page.runs.follow("t2", namespace="tenant-a", ticket=issued["ticket"]):
                pass
        # A refused ticket is asked for again once; refused again, the refusal is raised.
        asked = 0

        async def wrong_ticket() -> str:
            nonlocal asked
            asked += 1
            return issued["ticket"]

        with pytest.raises(UnauthorizedError):
            async for _ in page.runs.follow("t2", namespace="tenant-a", ticket=wrong_ticket):
                pass
        assert asked == 2


async def test_a_revoked_token_ends_its_stream_with_the_reason(scoped: Scoped, tmp_path: Path) -> None:
    async with Client(scoped.gateway.url, token=scoped.tenant_a) as a:
        await a.runs.start(run_id="rv", namespace="tenant-a", invocable="x", kind_of_invocable="agent")
        frames: list[RunFrame] = []

        async def follow() -> None:
            async for frame in a.runs.follow("rv", namespace="tenant-a"):
                frames.append(frame)

        following = asyncio.create_task(follow())
        await eventually(lambda: len(frames) == 1, "the stream open")
        # The token file without tenant-a's entry, re-read on SIGHUP.
        (tmp_path / "tokens.toml").write_text(scoped.reader_entry)
        scoped.gateway.process.send_signal(signal.SIGHUP)
        await asyncio.wait_for(following, 10)
        assert frames[-1] == RunEndFrame("token_revoked")
        with pytest.raises(UnauthorizedError):
            await a.runs.get("rv", namespace="tenant-a")
