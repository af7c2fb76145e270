"""A typed job queue and its worker loop, over any fleet backend.

The loop is switchyard's Rust consumer (prefetch and batched acks, heartbeats that extend what it
holds, retries with exponential backoff, dead letters after the last attempt, cancel and
timeouts, graceful shutdown); your handler is an ``async def`` that it runs on the event loop
that started it::

    import switchyard
    from switchyard.queue import Permanent, Queue

    fleet = await switchyard.open_fleet_backend("redis://localhost:6379/0")
    emails = Queue(fleet, "emails")
    await emails.push({"to": "ada@example.com"}, max_attempts=5)

    async def send(task):
        if "@" not in task.payload["to"]:
            raise Permanent("not an address")  # dead-lettered at once, never retried
        return {"sent": True}  # stored as the task's result

    async with emails.worker(send, concurrency=16) as worker:
        await worker.wait_idle()

Tasks are fleet-framework's envelopes (``{"id", "payload", "attempt", "submitted_at", …}``), so a
Python fleet worker, a Rust consumer and this one can share a queue. Delivery is at least once:
a worker that dies mid-task has its task delivered again after the visibility timeout.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

from switchyard import _native

__all__ = ["FailTask", "Permanent", "Queue", "Task", "Worker"]

JSON = Any
"""A JSON-serializable value (``json.dumps`` must accept it)."""


class Permanent(Exception):
    """Raise from a handler to dead-letter the task at once: a retry would not help."""


FailTask = Permanent
"""The same exception under the name the gateway clients use (``switchyard.gateway.FailTask``)."""


@dataclass(frozen=True, slots=True)
class Task:
    """One task as a handler receives it."""

    id: str
    payload: JSON
    attempt: int
    """1 on the first delivery; a crash or timeout counts as an attempt too."""
    last_error: str | None
    """Why the previous attempt failed, if one did."""


class Handler(Protocol):
    async def __call__(self, task: Task, /) -> JSON: ...


class Worker:
    """A running worker loop: ``wait_idle()`` until the queue is drained, ``shutdown()`` to stop
    (running handlers get the grace period; prefetched tasks are given back at once)."""

    def __init__(self, consumer: _native.Consumer) -> None:
        self._consumer = consumer

    def stats(self) -> dict[str, int]:
        """What the worker did so far: ``acked``, ``retried``, ``dead_lettered``, ``cancelled``,
        ``timed_out``, ``released``, ``lost``, ``expired``, ``malformed``, ``errors``."""
        return self._consumer.stats() or {}

    async def wait_idle(self) -> None:
        """Returns once nothing is waiting, reserved or scheduled in the queue (whoever holds it)."""
        await self._consumer.wait_idle()

    async def shutdown(self) -> dict[str, int]:
        """Stops the loop and returns the final counts."""
        return await self._consumer.shutdown() or {}

    async def __aenter__(self) -> Worker:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.shutdown()


class Queue:
    """A named queue of JSON payloads on a fleet backend."""

    def __init__(self, fleet: _native.FleetBackend, name: str) -> None:
        self._queue = _native.Queue(fleet, name)

    @property
    def name(self) -> str:
        return self._queue.name

    async def push(
        self,
        payload: JSON,
        *,
        id: str | None = None,
        priority: int = 0,
        ttl_seconds: int | None = None,
        max_attempts: int | None = None,
        timeout_seconds: float | None = None,
    ) -> str:
        """Enqueues ``payload``; the task id (``id``, else a fresh one). ``priority`` > 0 is the
        high tier, < 0 the low one; ``timeout_seconds`` bounds one attempt."""
        return await self._queue.push(
            json.dumps(payload),
            id=id,
            priority=priority,
            ttl_seconds=ttl_seconds,
            max_attempts=max_attempts,
            timeout_seconds=timeout_seconds,
        )

    async def get(self, id: str) -> dict[str, JSON] | None:
        """The task's record: ``state`` (``scheduled``, ``waiting``, ``running``, ``completed``,
        ``failed``, ``dead``, ``cancelled``), ``attempt``, ``last_error``, ``result`` (decoded),
        times; ``None`` when no record has the id."""
        record = await self._queue.get(id)
        if record is not None and record.get("result") is not None:
            record["result"] = json.loads(record["result"])
        return record

    async def cancel(self, id: str) -> str:
        """``cancelled`` (it never runs), ``cancel_requested`` (it was running: its handler is
        cancelled and it is never retried), ``finished:<state>`` or ``unknown``."""
        return await self._queue.cancel(id)

    async def stats(self) -> dict[str, JSON]:
        return await self._queue.stats()

    async def dead_letters(self, n: int = 100) -> list[dict[str, JSON]]:
        """Up to ``n`` dead-lettered envelopes, oldest first, with their ``last_error``."""
        return [json.loads(body) for body in await self._queue.dead_letters(n)]

    def worker(
        self,
        handler: Handler,
        *,
        concurrency: int = 1,
        visibility_seconds: float = 300.0,
        max_attempts: int = 3,
        timeout_seconds: float | None = None,
        shutdown_grace_seconds: float = 30.0,
        cancel_grace_seconds: float = 10.0,
    ) -> Worker:
        """Starts the worker loop on the running event loop (call it from a coroutine)."""

        async def run(view: _native.Task) -> JSON:
            task = Task(id=view.id, payload=json.loads(view.payload), attempt=view.attempt, last_error=view.last_error)
            return await handler(task)

        consumer = self._queue.consume(
            run,
            concurrency=concurrency,
            visibility_seconds=visibility_seconds,
            max_attempts=max_attempts,
            timeout_seconds=timeout_seconds,
            shutdown_grace_seconds=shutdown_grace_seconds,
            cancel_grace_seconds=cancel_grace_seconds,
        )
        return Worker(consumer)
