"""A producer, a worker and a followed run against a switchyard gateway.

Start a gateway (``switchyard serve``), then::

    python examples/gateway_worker.py            # SWITCHYARD_URL, default http://127.0.0.1:8080
    SWITCHYARD_TOKEN=sy_… python examples/gateway_worker.py

Uses only the public API of :mod:`switchyard.gateway`.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from typing import TypedDict

from switchyard.gateway import Client, FailTask, Json, RunEventFrame, TaskContext


class Thumbnail(TypedDict):
    size: int


class Outcome(TypedDict):
    results: list[Json]
    kinds: list[str]


async def main(base_url: str, token: str | None = None) -> Outcome:
    async with Client(base_url, token=token) as client:
        # Queue some work, and a worker that does it: the handler's return value is the task's result.
        jobs = client.queue("thumbnails")
        ids = [(await jobs.submit({"size": size}, max_attempts=3))["id"] for size in (64, 128, 256)]

        async def resize(task: TaskContext[Thumbnail]) -> dict[str, int]:
            await task.progress({"step": "resizing"})
            if task.payload["size"] > 1024:
                raise FailTask("too large")  # dead-letter it now, without the remaining attempts
            return {"pixels": task.payload["size"] ** 2}

        # `wait` is how long a reserve long-polls while nothing is due, and the most stopping waits for it.
        async with jobs.worker(resize, concurrency=4, wait=1):
            results = [(await jobs.wait(task_id, timeout=30))["result"] for task_id in ids]

        # An agent run, streamed as it is written.
        session = f"demo-{uuid.uuid4().hex[:8]}"
        run = await client.runs.start(session_id=session, invocable="helper", kind_of_invocable="agent")
        kinds: list[str] = []

        async def follow() -> None:
            async for frame in client.runs.follow(run["run_id"], session=session):
                if isinstance(frame, RunEventFrame):
                    kinds.append(frame.data["kind"])

        following = asyncio.create_task(follow())
        await client.runs.append(
            run["run_id"], {"kind": "text.delta", "message_id": "m1", "text": "Hello"}, session=session
        )
        await client.runs.append(
            run["run_id"],
            {"kind": "run.completed", "output": [], "usage": {"input_tokens": 1, "output_tokens": 1, "usd": None}},
            session=session,
        )
        await following  # the stream ends with the run
        return {"results": results, "kinds": kinds}


if __name__ == "__main__":
    url = os.environ.get("SWITCHYARD_URL", "http://127.0.0.1:8080")
    print(json.dumps(asyncio.run(main(url, os.environ.get("SWITCHYARD_TOKEN"))), indent=2))
