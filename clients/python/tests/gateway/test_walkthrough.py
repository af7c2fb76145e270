"""The README's walkthrough, through the client, against ``switchyard serve`` on the embedded
default: start, a busy session refused, appends, the live stream, an interrupt resumed exactly
once, the end, the read and the list, and a follower resumed from a cursor."""

from __future__ import annotations

import asyncio

import pytest
from switchyard.gateway import (
    Client,
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    RunEndFrame,
    RunEventFrame,
    RunFrame,
    RunGapFrame,
)

COMPLETED = {"kind": "run.completed", "output": [], "usage": {"input_tokens": 3, "output_tokens": 5, "usd": None}}


def kinds(frames: list[RunFrame]) -> list[str]:
    return [f.data["kind"] if isinstance(f, RunEventFrame) else f.type for f in frames]


async def test_the_walkthrough(client: Client) -> None:
    started = await client.runs.start(
        run_id="run-1",
        session_id="s1",
        invocable="helper",
        kind_of_invocable="agent",
        input=[{"type": "text", "text": "hello"}],
    )
    assert started["run_id"] == "run-1"
    assert started["status"] == "running"
    assert started["event"]["kind"] == "run.started"
    assert started["event"]["seq"] == 0

    # One open run per session: the second start names the run holding it.
    with pytest.raises(ConflictError) as busy:
        await client.runs.start(run_id="run-2", session_id="s1", invocable="helper", kind_of_invocable="agent")
    assert busy.value.status == 409
    assert busy.value.code == "session_busy"
    assert busy.value.held_by == "run-1"
    assert busy.value.request_id
    assert "session_busy" in str(busy.value)

    # Follow the stream while the run goes on.
    frames: list[RunFrame] = []

    async def follow() -> None:
        async for frame in client.runs.follow("run-1", session="s1"):
            frames.append(frame)

    following = asyncio.create_task(follow())

    one = await client.runs.append("run-1", {"kind": "text.delta", "message_id": "m1", "text": "Hel"}, session="s1")
    assert [e["seq"] for e in one["events"]] == [1]
    batch = await client.runs.append(
        "run-1",
        [
            {"kind": "text.delta", "message_id": "m1", "text": "lo"},
            {
                "kind": "run.interrupted",
                "interrupt_id": "i1",
                "reason": "approval",
                "payload": {},
                "thread_id": None,
                "expected_resume": None,
            },
        ],
        session="s1",
    )
    assert batch["status"] == "waiting_human"
    assert [e["seq"] for e in batch["events"]] == [2, 3]

    # Of five concurrent resumes exactly one wins; the others are refused `not_resumable`.
    resumes = await asyncio.gather(
        *(
            client.runs.resume("run-1", reason="approved", value=[{"type": "text", "text": "yes"}], session="s1")
            for _ in range(5)
        ),
        return_exceptions=True,
    )
    won = [r for r in resumes if not isinstance(r, BaseException)]
    assert len(won) == 1
    assert won[0]["status"] == "running"
    assert won[0]["event"]["kind"] == "run.resumed"
    for r in resumes:
        if isinstance(r, BaseException):
            assert isinstance(r, ConflictError), repr(r)
            assert r.code == "not_resumable"

    await client.runs.append("run-1", COMPLETED, session="s1")
    await asyncio.wait_for(following, 10)

    assert kinds(frames) == [
        "run.started",
        "text.delta",
        "text.delta",
        "run.interrupted",
        "run.resumed",
        "run.completed",
        "end",
    ]
    assert frames[-1] == RunEndFrame()
    events = [f for f in frames if isinstance(f, RunEventFrame)]
    assert [f.data["seq"] for f in events] == list(range(6))
    ids = [f.id for f in events]
    assert len(set(ids)) == len(ids), "every event once"
    assert all(f.event == f.data["kind"] for f in events)

    view = await client.runs.get("run-1", session="s1", from_seq=4)
    assert view["status"] == "completed"
    assert [e["kind"] for e in view["events"]] == ["run.resumed", "run.completed"]
    completed = await client.runs.list(status="completed")
    assert [r["run_id"] for r in completed["runs"]] == ["run-1"]

    # A follower resumed from a cursor gets exactly the events after it, then the end.
    cursor = ids[2]
    stream = client.runs.follow("run-1", session="s1", last_event_id=cursor)
    rest = [frame async for frame in stream]
    assert [f.id if isinstance(f, RunEventFrame) else f.type for f in rest] == [*ids[3:], "end"]
    assert stream.last_event_id == ids[-1]


async def test_a_cursor_that_is_not_one_gets_a_gap(client: Client) -> None:
    await client.runs.start(run_id="g1", invocable="helper", kind_of_invocable="agent")
    frames = [f async for f in client.runs.follow("g1", last_event_id="not-a-cursor")]
    assert len(frames) == 1
    gap = frames[0]
    assert isinstance(gap, RunGapFrame)
    assert gap.gap["run_id"] == "g1"
    assert gap.gap["requested_event_id"] == "not-a-cursor"
    assert gap.gap["recovery"]


async def test_refusals_are_typed_errors_with_the_gateways_code_message_and_request_id(client: Client) -> None:
    with pytest.raises(NotFoundError) as missing:
        await client.runs.get("no-such-run")
    assert missing.value.status == 404
    assert missing.value.code.replace("_", "").isalpha()
    assert missing.value.message
    assert missing.value.request_id
    assert not missing.value.retryable

    await client.runs.start(run_id="r1", session_id="s1", invocable="helper", kind_of_invocable="agent")
    # A kind the event model does not know is refused on its field.
    with pytest.raises(InvalidRequestError) as invalid:
        await client.runs.append("r1", {"kind": "tool.call"}, session="s1")
    assert invalid.value.status == 422
    assert invalid.value.field == "kind"
    assert invalid.value.body is not None and invalid.value.body["error"] == invalid.value.code

    # A run id its log already has is never reused.
    await client.runs.append("r1", COMPLETED, session="s1")
    with pytest.raises(ConflictError) as exists:
        await client.runs.start(run_id="r1", session_id="s1", invocable="helper", kind_of_invocable="agent")
    assert exists.value.code == "run_exists"
    assert exists.value.held_by is None

    # An unknown run's stream is not followed forever.
    with pytest.raises(NotFoundError):
        async for _ in client.runs.follow("no-such-run"):
            pass
