"""switchyard.agentdeck against agentdeck 3.1.0 itself: its runtime plays chat turns through our
stores, its own stores and ours give the same events, and both write one database together."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from agentdeck import Agent, Deck
from agentdeck.adapters.stores.postgres import PostgresEventStore as SeedPostgresEventStore
from agentdeck.adapters.stores.redis import RedisEventStore as SeedRedisEventStore
from agentdeck.core.context import RunContext
from agentdeck.core.events import Event, RunCompleted, RunInterrupted, RunResumed, RunStarted, TextDelta, Usage
from agentdeck.core.ports import EventStorePort
from agentdeck.core.status import RunStatus
from agentdeck.errors import StoreError
from agentdeck.testing import ScriptedModel, patch_model

from remote import RemoteSqliteEventStore
from switchyard.agentdeck import PostgresEventStore, RedisEventStore, SqliteEventStore
from switchyard.errors import UnavailableError

HOUR = timedelta(hours=1)

# Which store classes each backend has, ours and agentdeck's, opened on one shared place.
Pair = tuple[Callable[[], EventStorePort], Callable[[], EventStorePort]]


@pytest.fixture(params=["redis", "sqlite", "postgres"])
def stores(request: pytest.FixtureRequest, unique: str, tmp_path: Path) -> Pair:
    """``(ours, agentdeck's)`` factories on one database: a Redis prefix, a SQLite file or a
    PostgreSQL schema of this test's own. agentdeck's SQLite store runs in a child process:
    two SQLite libraries in one process do not see each other's locks (``remote.py``)."""
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        prefix = f"sy-test:{unique}"
        return (lambda: RedisEventStore(url, prefix=prefix), lambda: SeedRedisEventStore(url, prefix=prefix))
    if request.param == "sqlite":
        path = tmp_path / "events.db"
        return (lambda: SqliteEventStore(path), lambda: RemoteSqliteEventStore(str(path)))
    dsn = request.getfixturevalue("postgres_url").replace("postgres://", "postgresql://", 1)
    schema = f"sy_{unique}"
    return (lambda: PostgresEventStore(dsn, schema=schema), lambda: SeedPostgresEventStore(dsn, schema=schema))


async def close(store: EventStorePort) -> None:
    closer = getattr(store, "aclose", None)
    if closer is not None:
        await closer()
    else:
        store.close()  # type: ignore[attr-defined]


@pytest.fixture
async def ours(stores: Pair) -> AsyncIterator[EventStorePort]:
    store = stores[0]()
    yield store
    await close(store)


def opening(text: str = "hi") -> RunStarted:
    return RunStarted.model_validate(
        {"invocable": "chat", "kind_of_invocable": "agent", "input": [{"type": "text", "text": text}]}
    )


def completed() -> RunCompleted:
    return RunCompleted(output=[], usage=Usage(input_tokens=1, output_tokens=2))


def normalized(events: list[Event]) -> list[dict[str, Any]]:
    """Events up to what differs between two plays of one scenario: run and session ids and
    timestamps."""
    runs: dict[str, str] = {}
    out = []
    for event in events:
        data = json.loads(event.model_dump_json())
        data["run_id"] = runs.setdefault(data["run_id"], f"run-{len(runs)}")
        data.pop("ts")
        data["session_id"] = "session"
        out.append(data)
    return out


async def play_two_turns(store: EventStorePort, session: str) -> tuple[list[Event], list[str]]:
    """agentdeck's own runtime plays two chat turns of one session through ``store``, with the
    scripted model of ``agentdeck.testing`` (no network); the session's log, and the run ids."""
    os.environ.setdefault("OPENAI_API_KEY", "sk-test-not-used")
    agent = Agent(name="chat", instructions="Answer briefly.")
    cwd = os.getcwd()
    work = tempfile.mkdtemp(prefix="sy-deck-")
    os.chdir(work)  # the Deck keeps its engine's private session files in the working directory
    try:
        with patch_model(ScriptedModel(deltas=("Hel", "lo", "!"))):
            async with Deck(agents=[agent], observers=(), _store=store) as deck:
                first = await deck.run("chat", "hello", session_id=session)
                second = await deck.run("chat", "and again", session_id=session)
    finally:
        os.chdir(cwd)
    assert first.output == second.output
    log = await store.read(session, RunContext(run_id=first.run_id, session_id=session))
    return log, [first.run_id, second.run_id]


async def test_agentdecks_runtime_plays_chat_turns_through_our_store(ours: EventStorePort, unique: str) -> None:
    session = f"chat-{unique}"
    log, (first, second) = await play_two_turns(ours, session)
    kinds = [event.kind for event in log]
    assert kinds[0] == "run.started" and kinds[-1] == "run.completed"
    assert kinds.count("run.started") == 2 and kinds.count("run.completed") == 2
    assert "text.delta" in kinds
    for run_id in (first, second):
        ctx = RunContext(run_id=run_id, session_id=session)
        events = await ours.read_run(session, run_id, ctx)
        assert [event.seq for event in events] == list(range(len(events)))
        assert {event.session_id for event in events} == {session}
        assert await ours.run_status(session, run_id, ctx) == RunStatus.COMPLETED
    runs = await ours.list_runs(RunContext(run_id=first, session_id=session), RunStatus.COMPLETED)
    assert {(run.log_key, run.run_id) for run in runs} >= {(session, first), (session, second)}


async def test_the_same_turns_give_the_same_events_on_agentdecks_store_and_ours(stores: Pair, unique: str) -> None:
    theirs, mine = stores[1](), stores[0]()
    try:
        their_log, _ = await play_two_turns(theirs, f"same-{unique}-a")
        my_log, _ = await play_two_turns(mine, f"same-{unique}-b")
    finally:
        await close(theirs)
        await close(mine)
    assert normalized(my_log) == normalized(their_log)


async def test_both_stores_share_one_database_and_read_each_others_runs(stores: Pair, unique: str) -> None:
    theirs, mine = stores[1](), stores[0]()
    try:
        session = f"shared-{unique}"
        a = RunContext(run_id=f"a-{unique}", session_id=session)
        b = RunContext(run_id=f"b-{unique}", session_id=session)
        # A claim through one store holds the session against the other.
        claim, started = await mine.claim_start(session, opening(), a, "chat", HOUR)
        assert claim.held_by is None and started is not None and started.seq == 0
        refused, nothing = await theirs.claim_start(session, opening(), b, "chat", HOUR)
        assert (refused.held_by, nothing) == (a.run_id, None)
        # Appends from both, in turns, keep one dense run.
        for i in range(6):
            store = mine if i % 2 == 0 else theirs
            await store.append(session, [TextDelta(message_id="m", text=str(i))], a, "chat")
        await theirs.append(session, [completed()], a, "chat")
        # Now free: agentdeck's store opens the next run, ours sees it held.
        claim, started = await theirs.claim_start(session, opening("next"), b, "chat", HOUR)
        assert claim.held_by is None and started is not None
        refused, _ = await mine.claim_start(session, opening(), RunContext(run_id="c", session_id=session), "chat", HOUR)
        assert refused.held_by == b.run_id
        their_view = await theirs.read(session, a)
        my_view = await mine.read(session, a)
        assert [e.model_dump_json() for e in my_view] == [e.model_dump_json() for e in their_view]
        run_a = [e for e in my_view if e.run_id == a.run_id]
        assert [e.seq for e in run_a] == list(range(8))
        assert [e.kind for e in run_a] == ["run.started"] + ["text.delta"] * 6 + ["run.completed"]
        assert await mine.run_status(session, a.run_id, a) == RunStatus.COMPLETED
        assert await theirs.run_status(session, b.run_id, b) == RunStatus.RUNNING
    finally:
        await close(theirs)
        await close(mine)


async def test_resume_is_granted_once_across_both_stores(stores: Pair, unique: str) -> None:
    theirs, mine = stores[1](), stores[0]()
    try:
        session = f"resume-{unique}"
        ctx = RunContext(run_id=f"r-{unique}", session_id=session)
        await mine.claim_start(session, opening(), ctx, "chat", HOUR)
        await mine.append(
            session, [RunInterrupted(interrupt_id="i1", reason="human", payload={"q": "ok?"})], ctx, "chat"
        )
        resumed = RunResumed(value=[{"type": "text", "text": "yes"}])  # type: ignore[list-item]
        tries = [store.claim_resume(session, ctx.run_id, resumed, ctx, "chat") for store in (mine, theirs) * 5]
        results = await asyncio.gather(*tries, return_exceptions=True)
        granted = [r for r in results if isinstance(r, Event)]
        assert len(granted) == 1, results
        assert all(r is None or isinstance(r, Event) or isinstance(r, StoreError) for r in results)
    finally:
        await close(theirs)
        await close(mine)


async def test_a_waiting_run_is_invisible_to_agentdecks_store_and_starts_in_turn(stores: Pair, unique: str) -> None:
    """A second message to a busy session (ADR 0394) beside agentdeck's own store on one
    database: the waiting run has no event, so agentdeck reads only kinds it knows and sees the
    session free; its claim wins while the run waits, the line waits behind agentdeck's run and
    starts the waiting run once that run ends; an interrupt ends a run with ``run.cancelled``,
    which agentdeck folds as it always has."""
    theirs, mine = stores[1](), stores[0]()
    assert isinstance(mine, (RedisEventStore, SqliteEventStore, PostgresEventStore))
    try:
        session = f"line-{unique}"

        def ctx(run: str) -> RunContext:
            return RunContext(run_id=f"{run}-{unique}", session_id=session)

        first = await mine.claim(session, opening(), ctx("holder"), "chat", HOUR)
        assert first.outcome == "started", first
        waiting = await mine.claim(session, opening(), ctx("waiting"), "chat", HOUR, strategy="enqueue")
        assert (waiting.outcome, waiting.position) == ("queued", 1), waiting
        assert (await mine.turn(ctx("waiting"))).state == "waiting"
        # The holder ends through agentdeck's store, which knows nothing of the line.
        await theirs.append(session, [completed()], ctx("holder"), "chat")
        log = await theirs.read(session, ctx("holder"))
        assert [e.kind for e in log] == ["run.started", "run.completed"]
        assert await theirs.run_status(session, ctx("waiting").run_id, ctx("waiting")) == RunStatus.PENDING
        claim, event = await theirs.claim_start(session, opening(), ctx("theirs"), "chat", HOUR)
        assert claim.held_by is None and event is not None, claim
        # The line now waits behind agentdeck's run, and moves once it ends.
        assert (await mine.turn(ctx("waiting"))).state == "waiting"
        await theirs.append(session, [completed()], ctx("theirs"), "chat")
        turn = await mine.turn(ctx("waiting"))
        assert turn.state == "started" and turn.event is not None, turn
        assert turn.event.run_id == ctx("waiting").run_id
        boss = await mine.claim(session, opening(), ctx("boss"), "chat", HOUR, strategy="interrupt")
        assert boss.outcome == "started" and [e.run_id for e in boss.ended] == [ctx("waiting").run_id], boss
        assert await theirs.run_status(session, ctx("waiting").run_id, ctx("waiting")) == RunStatus.CANCELLED
        kinds = [e.kind for e in await theirs.read(session, ctx("boss"))]
        assert kinds == [
            "run.started",
            "run.completed",
            "run.started",
            "run.completed",
            "run.started",
            "run.cancelled",
            "run.started",
        ], kinds
    finally:
        await close(theirs)
        await close(mine)


async def test_five_hundred_concurrent_appenders_to_one_run_all_succeed(ours: EventStorePort, unique: str) -> None:
    session = f"many-{unique}"
    ctx = RunContext(run_id=f"m-{unique}", session_id=session)
    await ours.claim_start(session, opening(), ctx, "chat", HOUR)
    results = await asyncio.gather(
        *(ours.append(session, [TextDelta(message_id="m", text=str(i))], ctx, "chat") for i in range(500)),
        return_exceptions=True,
    )
    errors = [r for r in results if isinstance(r, BaseException)]
    assert errors == []
    events = await ours.read_run(session, ctx.run_id, ctx)
    assert sorted(e.seq for e in events) == list(range(501))
    assert sorted(e.payload.text for e in events[1:]) == sorted(str(i) for i in range(500))  # type: ignore[union-attr]


async def test_bad_input_raises_value_error_as_agentdecks_stores_do(ours: EventStorePort) -> None:
    ctx = RunContext(run_id="r", session_id="s")
    with pytest.raises(ValueError, match="limit"):
        await ours.read("s", ctx, 0, -1)
    with pytest.raises(ValueError, match="log of this run"):
        await ours.append("another-session", [TextDelta(message_id="m", text="x")], ctx, "chat")
    with pytest.raises(ValueError, match="cannot be made in the context"):
        await ours.claim_resume("s", "other-run", RunResumed(), ctx, "chat")


async def test_a_closed_store_and_a_dead_server_raise_store_error_saying_what_to_do(unique: str) -> None:
    store = RedisEventStore("redis://127.0.0.1:1/0", prefix=f"dead:{unique}")
    with pytest.raises(StoreError, match="reachable") as failed:
        await store.read("s", RunContext(run_id="r", session_id="s"))
    assert isinstance(failed.value.__cause__, UnavailableError)
    sqlite = SqliteEventStore(":memory:")
    await sqlite.append("r", [TextDelta(message_id="m", text="x")], RunContext(run_id="r"), "chat")
    sqlite.close()
    with pytest.raises(StoreError, match="closed"):
        await sqlite.read("r", RunContext(run_id="r"))


def test_a_url_that_is_not_postgres_is_refused_with_the_form_to_use() -> None:
    with pytest.raises(ValueError, match="postgresql://USER"):
        PostgresEventStore("host=localhost dbname=app")
