"""Through Python, the seeds' own Redis stores against ours, in one process, alternating rounds.

    python bench/seeds.py REDIS_URL [--seconds S] [--rounds N]

Prints one JSON object: for each case the seed's rate, ours, their ratio per round and errors.

* ``append, 1 writer``: one coroutine appending one event at a time to one run
  (agentdeck's ``RedisEventStore.append`` against ``switchyard.agentdeck.RedisEventStore``);
* ``append, 100 concurrent``: 100 coroutines appending at once to one run, errors counted
  (agentdeck's optimistic store gives up under contention);
* ``queue cycle, 1 worker``: push → reserve → ack, one at a time (fleet's ``RedisBackend``
  against ``switchyard.fleet``'s backend, both through fleet's ``Backend`` protocol);
* ``queue cycle, 16 workers``: the same with 16 coroutines at once.

fleet's ``Backend`` protocol awaits push, reserve and ack one by one, each a round trip of its
own, so no backend behind it does a one-worker cycle in less than three of its cheapest round
trips. Each round of ``queue cycle, 1 worker`` therefore also times three of our ``kv_get``
awaited one by one: ``ceiling`` (those per second over the seed's cycles per second, same round)
is the highest ratio any implementation behind the protocol could report for that round.

``cargo xtask bench --suite python`` runs it against a private Redis with the release extension.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta

from agentdeck.adapters.stores.redis import RedisEventStore as SeedStore
from agentdeck.core.context import RunContext
from agentdeck.core.events import RunStarted, TextDelta
from fleet.core.backend import RedisBackend as SeedBackend

from switchyard.agentdeck import RedisEventStore as OurStore
from switchyard.fleet import backend_from_url

DELTA = [TextDelta(message_id="m", text="x")]
OPENING = RunStarted.model_validate({"invocable": "a", "kind_of_invocable": "agent", "input": []})


async def timed(seconds: float, step: Callable[[int], Awaitable[None]], workers: int) -> tuple[float, int]:
    """Runs ``step`` in ``workers`` coroutines for about ``seconds``; (ops per second, errors)."""
    done = 0
    errors = 0
    deadline = time.perf_counter() + seconds

    async def worker(w: int) -> None:
        nonlocal done, errors
        i = 0
        while time.perf_counter() < deadline:
            try:
                await step(w * 1_000_000 + i)
            except Exception:
                errors += 1
            done += 1
            i += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(workers)))
    return done / (time.perf_counter() - start), errors


async def append_case(store, workers: int, seconds: float) -> tuple[float, int]:
    tag = uuid.uuid4().hex[:8]
    ctx = RunContext(run_id=f"r-{tag}", session_id=f"s-{tag}")
    await store.claim_start(ctx.log_key, OPENING, ctx, "bench", timedelta(hours=1))

    async def step(_: int) -> None:
        await store.append(ctx.log_key, DELTA, ctx, "bench")

    return await timed(seconds, step, workers)


async def cycle_case(backend, workers: int, seconds: float) -> tuple[float, int]:
    queue = f"bench-{uuid.uuid4().hex[:8]}"

    async def step(i: int) -> None:
        task_id = f"t{i}"
        await backend.queue_push(queue, json.dumps({"id": task_id, "payload": {}}).encode())
        body = await backend.queue_reserve(queue, 1.0, 30)
        got = json.loads(body)["id"]
        if not await backend.queue_ack(queue, got):
            raise RuntimeError(f"ack of {got} refused")

    return await timed(seconds, step, workers)


async def three_gets_case(backend, seconds: float) -> tuple[float, int]:
    key = f"bench-{uuid.uuid4().hex[:8]}"
    await backend.kv_set("bench", key, b"x", None)

    async def step(_: int) -> None:
        for _ in range(3):
            await backend.kv_get("bench", key)

    return await timed(seconds, step, 1)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("redis_url")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    url = args.redis_url
    prefix = f"bench:{uuid.uuid4().hex[:8]}"
    seed_store, our_store = SeedStore(url, prefix=prefix), OurStore(url, prefix=prefix)
    seed_fleet, our_fleet = SeedBackend(url), backend_from_url("switchyard+" + url)
    cases = {
        "append, 1 writer": (lambda s: append_case(s, 1, args.seconds), seed_store, our_store),
        "append, 100 concurrent": (lambda s: append_case(s, 100, args.seconds), seed_store, our_store),
        "queue cycle, 1 worker": (lambda b: cycle_case(b, 1, args.seconds), seed_fleet, our_fleet),
        "queue cycle, 16 workers": (lambda b: cycle_case(b, 16, args.seconds), seed_fleet, our_fleet),
    }
    report = {}
    for name, (run, seed, ours) in cases.items():
        await run(ours)  # warm both: connections, scripts
        await run(seed)
        rounds = []
        for _ in range(args.rounds):
            seed_rate, seed_errors = await run(seed)
            our_rate, our_errors = await run(ours)
            row = {"seed": seed_rate, "ours": our_rate, "seed_errors": seed_errors, "our_errors": our_errors}
            if name == "queue cycle, 1 worker":
                gets, _ = await three_gets_case(ours, args.seconds)
                row["ceiling"] = gets / seed_rate
            rounds.append(row)
        report[name] = {
            "rounds": rounds,
            "ratio_median": statistics.median(r["ours"] / r["seed"] for r in rounds),
            "ratio_min": min(r["ours"] / r["seed"] for r in rounds),
            "our_errors": sum(r["our_errors"] for r in rounds),
            "seed_errors": sum(r["seed_errors"] for r in rounds),
        }
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main())
