"""fleet-framework on switchyard: the same master, worker and automation code, a switchyard URL.

With ``pip install 'switchyard-py[fleet]'`` the ``switchyard+…`` schemes are registered with
fleet's ``backend_from_url``, so nothing else changes::

    fleet master --backend-url switchyard+redis://127.0.0.1:6379/0
    fleet worker --type my_automation --master-url http://127.0.0.1:8000 \\
        --backend-url switchyard+sqlite:///var/lib/fleet/fleet.db

This script does in one process what a worker slot does with a task: submit, reserve, run,
ack (or retry, or dead-letter), and reads the rest of the protocol back, on the URL given
(default: an SQLite file in a temporary directory; try ``switchyard+redis://127.0.0.1:6379/0``
next to a fleet ``RedisBackend``: both see the same tasks).

    python examples/fleet_backend.py [URL]
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

from fleet.core.backend import Backend, backend_from_url


async def main(url: str) -> None:
    # fleet's own factory finds switchyard through the `fleet.backends` entry points.
    backend = backend_from_url(url)
    assert isinstance(backend, Backend)
    print(f"{url} -> {backend!r}")
    queue = "example_" + uuid.uuid4().hex[:8]
    try:
        # Producer: what fleet's master does for POST /api/v1/automations/{type}/tasks.
        for n, priority in ((1, 0), (2, 1), (3, 0)):
            envelope = {"id": f"task-{n}", "payload": {"n": n}, "attempt": 0, "submitted_at": time.time()}
            await backend.queue_push(queue, json.dumps(envelope).encode(), priority=priority)
        print("waiting:", await backend.queue_size(queue))

        # Consumer: what a BatchAutomation slot does. Acks are by task id, for reservations made
        # through this same backend object.
        while (body := await backend.queue_reserve(queue, timeout_seconds=1, visibility_seconds=30)) is not None:
            envelope = json.loads(body)
            envelope["attempt"] += 1
            if envelope["payload"]["n"] == 3 and envelope["attempt"] == 1:
                print(f"{envelope['id']}: failed, retrying in 0.5 s")
                await backend.queue_nack(queue, envelope["id"], json.dumps(envelope).encode(), delay_seconds=0.5)
                await asyncio.sleep(0.6)
                continue
            await backend.counter_incr(f"{queue}:done", 1)
            await backend.kv_set(
                queue, envelope["id"], json.dumps({"n2": envelope["payload"]["n"] ** 2}).encode(), 3600
            )
            print(
                f"{envelope['id']}: done on attempt {envelope['attempt']}:",
                await backend.queue_ack(queue, envelope["id"]),
            )

        print(
            "done:",
            await backend.counter_get(f"{queue}:done"),
            "result of task-2:",
            await backend.kv_get(queue, "task-2"),
        )

        # What fleet's protocol does not have is on the native backend.
        native = await backend.native()  # type: ignore[attr-defined]
        print("queue stats:", await native.queue_stats(queue))

        # Pools, locks, the worker registry: fleet's shapes.
        await backend.pool_put(queue, "proxy-1", b'{"url": "http://p1"}', {"country": "de"}, None)
        item = await backend.pool_claim_any(queue, {"country": "de"}, 30)
        print("claimed:", item)
        print("released:", await backend.pool_release(queue, item.id))
        token = await backend.lock_acquire(queue, 10, 1.0)
        print("lock:", token is not None, await backend.lock_release(queue, token))
        await backend.worker_register(queue, "w1", {"cores": 2, "ram_gb": 4, "hostname": "example", "kernel": "6"})
        await backend.worker_set_config(queue, "w1", {"enabled": True, "slots": 2})
        print("worker:", await backend.worker_get(queue, "w1"))
        await backend.worker_remove(queue, "w1")
        await backend.pool_remove(queue, "proxy-1")
    finally:
        await backend.aclose()  # type: ignore[attr-defined]


if __name__ == "__main__":
    if len(sys.argv) > 1:
        target = sys.argv[1]
    else:
        target = f"switchyard+sqlite://{Path(tempfile.mkdtemp()) / 'fleet.db'}"
    asyncio.run(main(target))
