"""A queue: submit and control tasks, read their records and ends, and the HTTP worker verbs."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, TypeVar, cast

from switchyard.gateway._http import Transport, seg
from switchyard.gateway.sse import Follow, Reconnect, ReconnectInfo, SseMessage
from switchyard.gateway.types import (
    AckedMany,
    AckItem,
    CancelAnswer,
    Cancelled,
    DeadLetterList,
    EventsPage,
    InFlightList,
    JsonInput,
    Keep,
    Nacked,
    PauseState,
    Priority,
    QueueStats,
    Requeued,
    Reservations,
    ReservedTask,
    Retention,
    RetryPolicy,
    Submitted,
    Task,
    TaskEnd,
    WaitingTasks,
)
from switchyard.gateway.worker import Handler, Worker

__all__ = ["Queue", "QueueFrame", "QueueGapFrame", "TaskEndFrame"]

P = TypeVar("P")

ENDED: frozenset[str] = frozenset({"completed", "failed", "dead", "cancelled"})
"""The states a task ends in."""


@dataclass(frozen=True, slots=True)
class TaskEndFrame:
    """A task ended: ``event`` is its end (``completed``, ``failed``, ``dead``, ``cancelled``)."""

    id: str
    """The end's cursor: pass it as ``last_event_id`` to resume after it."""
    event: str
    data: TaskEnd
    type: Literal["end"] = field(default="end", init=False)


@dataclass(frozen=True, slots=True)
class QueueGapFrame:
    """The cursor was trimmed (or was not one of this log): ends between it and the oldest kept
    were lost, and following goes on from the oldest kept. Read the tasks you wait for by id."""

    requested: str
    recovery: str
    type: Literal["gap"] = field(default="gap", init=False)


QueueFrame: TypeAlias = TaskEndFrame | QueueGapFrame
"""What following a queue's events yields."""


def classify_queue_message(message: SseMessage) -> tuple[QueueFrame | None, bool]:
    if not message.id:
        if message.event == "gap":
            data = json.loads(message.data)
            return QueueGapFrame(str(data.get("requested", "")), str(data.get("recovery", ""))), False
        return None, False
    return TaskEndFrame(message.id, message.event, cast(TaskEnd, json.loads(message.data))), False


def _drop_none(values: Mapping[str, object]) -> dict[str, object]:
    return {k: v for k, v in values.items() if v is not None}


class Queue:
    """One queue of a gateway (``client.queue(name)``; nothing is sent until a method is called)."""

    def __init__(self, transport: Transport, name: str) -> None:
        if not name:
            raise ValueError("a queue name must not be empty")
        self._t = transport
        self.name = name
        self._base = f"/v1/queues/{seg(name)}"

    def __repr__(self) -> str:
        return f"Queue({self.name!r})"

    async def submit(
        self,
        payload: JsonInput,
        *,
        id: str | None = None,
        priority: Priority | None = None,
        delay_seconds: float | None = None,
        run_at: float | str | None = None,
        max_attempts: int | None = None,
        idempotency_key: str | None = None,
        retry: RetryPolicy | None = None,
        timeout_seconds: float | None = None,
        ttl_seconds: int | None = None,
    ) -> Submitted:
        """Submits a task (``payload``: any JSON but ``null``).

        ``id`` defaults to a fresh one (the id of a task still live or dead-lettered raises
        ``task_exists``; a finished task's id starts a new task);
        ``delay_seconds`` or ``run_at`` (unix seconds or RFC 3339) schedule it; ``max_attempts``
        bounds its deliveries; ``retry`` sets the delay between attempts; ``timeout_seconds``
        bounds one attempt; a second submit with the same ``idempotency_key`` within a day enqueues
        nothing and answers ``duplicate`` with the first id.
        """
        body = _drop_none(
            {
                "payload": payload,
                "id": id,
                "priority": priority,
                "delay_seconds": delay_seconds,
                "run_at": run_at,
                "max_attempts": max_attempts,
                "idempotency_key": idempotency_key,
                "retry": retry,
                "timeout_seconds": timeout_seconds,
                "ttl_seconds": ttl_seconds,
            }
        )
        body["payload"] = payload
        return cast(Submitted, await self._t.json("POST", f"{self._base}/tasks", body=body))

    async def stats(self) -> QueueStats:
        """Every count of the queue, from one snapshot."""
        return cast(QueueStats, await self._t.json("GET", self._base))

    async def task(self, task_id: str, *, wait_seconds: float | None = None) -> Task:
        """A task's record by id. With ``wait_seconds`` (at most 60, within the gateway's request
        deadline) it long-polls until the task ends, or answers the record as it stands when the
        wait passes."""
        return cast(
            Task,
            await self._t.json(
                "GET",
                f"{self._base}/tasks/{seg(task_id)}",
                query={"wait_seconds": wait_seconds},
                extra_timeout=wait_seconds or 0.0,
            ),
        )

    async def wait(self, task_id: str, *, timeout: float | None = None) -> Task:
        """Waits until the task ends and returns its record (its ``result`` when it completed),
        polling in long polls of up to 25 s until ``timeout`` seconds (``None``: no limit) pass;
        then the record as it stands."""
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            # Whole seconds, rounded up: a last wait under one second must not become a busy loop.
            wait = max(0, min(25, math.ceil(left))) if left != math.inf else 25
            task = await self.task(task_id, wait_seconds=wait)
            if task["state"] in ENDED or time.monotonic() >= deadline:
                return task

    async def cancel(self, task_id: str) -> Cancelled:
        """Cancels a task: a scheduled or waiting one never runs (``cancelled``); a running one is
        marked (``cancel_requested``) and its worker learns it on its next extend, progress or end;
        a finished one is left alone (``finished``)."""
        return cast(Cancelled, await self._t.json("DELETE", f"{self._base}/tasks/{seg(task_id)}"))

    async def cancel_many(self, task_ids: Sequence[str]) -> CancelAnswer:
        """Cancels up to 1,000 tasks in one atomic step; one result per id, in order."""
        return cast(
            CancelAnswer, await self._t.json("POST", f"{self._base}/tasks/cancel", body={"ids": list(task_ids)})
        )

    async def purge(self) -> CancelAnswer:
        """Cancels every scheduled and waiting task (running ones are not touched); ``purged``
        counts them."""
        return cast(CancelAnswer, await self._t.json("POST", f"{self._base}/tasks/cancel", body={"all_waiting": True}))

    async def waiting(self, *, limit: int | None = None) -> WaitingTasks:
        """The next waiting tasks (at most ``limit``)."""
        return cast(WaitingTasks, await self._t.json("GET", f"{self._base}/tasks", query={"limit": limit}))

    async def in_flight(self, *, limit: int | None = None) -> InFlightList:
        """Reservations in flight, with their progress (never their receipts)."""
        return cast(InFlightList, await self._t.json("GET", f"{self._base}/in-flight", query={"limit": limit}))

    async def dead_letters(self, *, limit: int | None = None) -> DeadLetterList:
        """Dead letters, oldest first, each with the ``ref`` that names it for :meth:`requeue`."""
        return cast(DeadLetterList, await self._t.json("GET", f"{self._base}/dead-letters", query={"limit": limit}))

    async def requeue(
        self, *, limit: int | None = None, refs: Sequence[str] | None = None, priority: Priority | None = None
    ) -> Requeued:
        """Puts dead letters back in the queue with a fresh attempt count: the oldest ``limit``
        (default all), or exactly those named by ``refs``."""
        body = _drop_none({"limit": limit, "refs": None if refs is None else list(refs), "priority": priority})
        return cast(Requeued, await self._t.json("POST", f"{self._base}/dead-letters/requeue", body=body))

    async def pause(self) -> PauseState:
        """Stops reservations (submits are still taken)."""
        return cast(PauseState, await self._t.json("POST", f"{self._base}/pause"))

    async def resume(self) -> PauseState:
        """Lets reservations go on."""
        return cast(PauseState, await self._t.json("POST", f"{self._base}/resume"))

    async def set_rate_limit(self, max: int, per_seconds: float) -> QueueStats:
        """At most ``max`` reservations per ``per_seconds`` across every worker."""
        body = {"max": max, "per_seconds": per_seconds}
        return cast(QueueStats, await self._t.json("PUT", f"{self._base}/rate-limit", body=body))

    async def clear_rate_limit(self) -> QueueStats:
        """Removes the rate limit."""
        return cast(QueueStats, await self._t.json("DELETE", f"{self._base}/rate-limit"))

    async def retention(self) -> Retention:
        """What the queue keeps of finished tasks and of its events."""
        return cast(Retention, await self._t.json("GET", f"{self._base}/retention"))

    async def set_retention(
        self, *, completed: Keep | None = None, failed: Keep | None = None, events: Keep | None = None
    ) -> Retention:
        """Replaces the retention of the kinds given; the others stay as they are."""
        body = _drop_none({"completed": completed, "failed": failed, "events": events})
        return cast(Retention, await self._t.json("PUT", f"{self._base}/retention", body=body))

    async def events_page(self, *, after: str | None = None, limit: int | None = None) -> EventsPage:
        """One page of the queue's ends after ``after`` (``None``: from the oldest kept); pass its
        ``cursor`` as the next page's ``after``."""
        query = {"after": after, "limit": limit}
        return cast(EventsPage, await self._t.json("GET", f"{self._base}/events/page", query=query))

    def events(
        self,
        *,
        last_event_id: str | None = None,
        reconnect: Reconnect | None = None,
        on_reconnect: Callable[[ReconnectInfo], None] | None = None,
    ) -> Follow[QueueFrame]:
        """Follows the queue's task ends as they happen (at least once, in order), resuming after
        ``last_event_id`` when given; without it, only new ends. It never ends by itself: leave the
        loop (or close it) to stop."""
        return Follow(
            self._t,
            f"{self._base}/events",
            {},
            classify_queue_message,
            last_event_id=last_event_id,
            ticket=None,
            reconnect=reconnect,
            on_reconnect=on_reconnect,
        )

    # The HTTP worker API: reserve, then end each reservation by its receipt.

    async def reserve(
        self, *, max_tasks: int = 1, visibility_seconds: float | None = None, wait_seconds: float | None = None
    ) -> list[ReservedTask]:
        """Reserves up to ``max_tasks`` (at most 100) due tasks for ``visibility_seconds``
        (default 30), waiting up to ``wait_seconds`` (at most 30) while none is due. An empty list
        when nothing came."""
        body = _drop_none({"max": max_tasks, "visibility_seconds": visibility_seconds, "wait_seconds": wait_seconds})
        answer = cast(
            Reservations,
            await self._t.json("POST", f"{self._base}/reservations", body=body, extra_timeout=wait_seconds or 0.0),
        )
        return answer["tasks"]

    async def ack(self, receipt: str, result: JsonInput = None) -> None:
        """Completes a reservation, storing ``result`` (any JSON; ``None``: none) with the task's end."""
        body = {} if result is None else {"result": result}
        await self._t.json("POST", f"{self._base}/reservations/{seg(receipt)}/ack", body=body)

    async def ack_many(self, acks: Sequence[AckItem]) -> AckedMany:
        """Completes up to 1,000 reservations in one request; each is answered on its own, in order
        (a lost reservation is ``ok: false`` with ``receipt_not_current``, not a raised error)."""
        body = {"acks": [dict(a) for a in acks]}
        return cast(AckedMany, await self._t.json("POST", f"{self._base}/reservations/ack", body=body))

    async def nack(self, receipt: str, *, delay_seconds: float | None = None, reason: str | None = None) -> Nacked:
        """Gives a reservation back as a failed attempt: it is retried after ``delay_seconds``
        (``None``: what the task's retry policy says), or dead-lettered when it was the last
        attempt (``dead_lettered``)."""
        body = _drop_none({"delay_seconds": delay_seconds, "reason": reason})
        return cast(Nacked, await self._t.json("POST", f"{self._base}/reservations/{seg(receipt)}/nack", body=body))

    async def fail(self, receipt: str, reason: str | None = None) -> None:
        """Dead-letters a reservation now, with ``reason`` as its last error."""
        body = _drop_none({"reason": reason})
        await self._t.json("POST", f"{self._base}/reservations/{seg(receipt)}/fail", body=body)

    async def extend(self, receipt: str, visibility_seconds: float) -> None:
        """Keeps a reservation for ``visibility_seconds`` more from now."""
        body = {"visibility_seconds": visibility_seconds}
        await self._t.json("POST", f"{self._base}/reservations/{seg(receipt)}/extend", body=body)

    async def progress(self, receipt: str, value: JsonInput) -> None:
        """Reports progress (any JSON up to 64 KiB), kept with the task and shown in flight."""
        await self._t.json("POST", f"{self._base}/reservations/{seg(receipt)}/progress", body=value)

    def worker(
        self,
        handler: Handler[P],
        *,
        concurrency: int = 1,
        visibility: float = 30.0,
        extend_every: float | None = None,
        wait: float = 5.0,
        batch_acks: bool | None = None,
        ack_window: float = 0.005,
        cancel_grace: float = 5.0,
        on_error: Callable[[BaseException, ReservedTask | None], None] | None = None,
    ) -> Worker[P]:
        """A worker that runs ``handler`` on this queue's tasks (see :class:`~switchyard.gateway.Worker`
        for what each option does). Start it with ``async with``, :meth:`Worker.start` or
        :meth:`Worker.run`."""
        return Worker(
            self,
            handler,
            concurrency=concurrency,
            visibility=visibility,
            extend_every=extend_every,
            wait=wait,
            batch_acks=batch_acks,
            ack_window=ack_window,
            cancel_grace=cancel_grace,
            on_error=on_error,
        )
