"""switchyard from plain Python: an event log with a session claim, and a job queue run by the
Rust worker loop, on one SQLite file (or any URL given: redis://…, postgres://…).

    python examples/quickstart.py [URL]
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

import switchyard
from switchyard.queue import Permanent, Queue, Task


async def main(url: str) -> None:
    # The event store: a claim opens a run on a session; a second claim while it is open is
    # refused with the holder's id (data, not an error); appends get dense seqs from the store.
    store = await switchyard.open_event_store(url)
    opening = json.dumps({"kind": "run.started", "invocable": "chat", "kind_of_invocable": "agent", "input": []})
    held_by, _, started = await store.claim_start(None, "session-1", "run-1", opening, "example", 3600)
    assert held_by is None and started is not None
    held_by, _, _ = await store.claim_start(None, "session-1", "run-2", opening, "example", 3600)
    print("second claim refused, held by", held_by)
    delta = json.dumps({"kind": "text.delta", "message_id": "m1", "text": "Hello"})
    events = await store.append(None, "session-1", "run-1", [delta, delta], "example")
    print("appended seqs", [json.loads(e)["seq"] for e in events])
    print("status", await store.run_status(None, "session-1", "run-1"))

    # The job queue: tasks in fleet-framework's envelope, a worker loop with retries and
    # dead letters; the handler's return value is stored as the task's result.
    fleet = await switchyard.open_fleet_backend(url)
    queue = Queue(fleet, "emails")
    good = await queue.push({"to": "ada@example.com"})
    bad = await queue.push({"to": "nobody"}, max_attempts=3)

    async def send(task: Task) -> dict[str, str]:
        if "@" not in task.payload["to"]:
            raise Permanent(f"{task.payload['to']!r} is not an address")
        return {"sent_to": task.payload["to"]}

    async with queue.worker(send, concurrency=4, visibility_seconds=30) as worker:
        await worker.wait_idle()
    print("good:", (await queue.get(good) or {}).get("result"))
    print("bad:", (await queue.get(bad) or {}).get("state"), (await queue.get(bad) or {}).get("last_error"))
    print("worker", worker.stats())


if __name__ == "__main__":
    default = f"sqlite://{Path(tempfile.mkdtemp()) / 'switchyard.db'}"
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else default))
