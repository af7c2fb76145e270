"""An asyncio client for the switchyard gateway's HTTP API: agent runs and their live streams,
queues, and a worker. It needs only :mod:`httpx` (no native extension)::

    from switchyard.gateway import Client, RunEventFrame, TaskContext

    async with Client("http://127.0.0.1:8080", token=secret) as client:
        run = await client.runs.start(run_id="run-1", session_id="s1", invocable="helper", kind_of_invocable="agent")
        async for frame in client.runs.follow("run-1", session="s1"):
            if isinstance(frame, RunEventFrame):
                print(frame.data["kind"])

        jobs = client.queue("jobs")
        await jobs.submit({"url": "https://example.org"})

        async def handle(task: TaskContext[dict[str, str]]) -> dict[str, int]:
            return {"size": len(task.payload["url"])}

        async with jobs.worker(handle, concurrency=8):
            ...

Refusals raise typed errors (:class:`GatewayError` and its subclasses) carrying the gateway's
``code``, ``message``, ``field`` and ``request_id``.
"""

from switchyard.gateway.client import Client
from switchyard.gateway.errors import (
    CancelledTaskError,
    ConflictError,
    ForbiddenError,
    GatewayError,
    InvalidRequestError,
    NetworkError,
    NotFoundError,
    ReceiptLostError,
    ServiceUnavailableError,
    TooLargeError,
    UnauthorizedError,
)
from switchyard.gateway.queues import Queue, QueueFrame, QueueGapFrame, TaskEndFrame
from switchyard.gateway.runs import RunEndFrame, RunEventFrame, RunFrame, RunGapFrame, Runs, StreamGap
from switchyard.gateway.sse import Follow, Reconnect, ReconnectInfo, SseMessage, SseParser, TicketSource
from switchyard.gateway.types import (
    AckedMany,
    AckItem,
    AckOutcome,
    AppendedEvents,
    Block,
    CancelAnswer,
    Cancelled,
    CancelResult,
    DeadLetterList,
    Deleted,
    EventsPage,
    InFlightList,
    InFlightTask,
    Json,
    JsonInput,
    Keep,
    LastError,
    Nacked,
    PauseState,
    Payload,
    Priority,
    QueueList,
    QueueStats,
    RateLimit,
    Requeued,
    ReservedTask,
    Resumed,
    Retention,
    RetryPolicy,
    RunEntry,
    RunEvent,
    RunList,
    RunStatus,
    RunView,
    Schedule,
    ScheduleList,
    Started,
    Submitted,
    Task,
    TaskEnd,
    TaskState,
    Ticket,
    WaitingTasks,
    WorkerList,
    WorkerRecord,
)
from switchyard.gateway.worker import (
    FailTask,
    Handler,
    RetryTask,
    TaskContext,
    TaskTimeoutError,
    Worker,
    WorkerStats,
    WorkerStoppedError,
)

__all__ = [
    "AckItem",
    "AckOutcome",
    "AckedMany",
    "AppendedEvents",
    "Block",
    "CancelAnswer",
    "CancelResult",
    "Cancelled",
    "CancelledTaskError",
    "Client",
    "ConflictError",
    "DeadLetterList",
    "Deleted",
    "EventsPage",
    "FailTask",
    "Follow",
    "ForbiddenError",
    "GatewayError",
    "Handler",
    "InFlightList",
    "InFlightTask",
    "InvalidRequestError",
    "Json",
    "JsonInput",
    "Keep",
    "LastError",
    "Nacked",
    "NetworkError",
    "NotFoundError",
    "PauseState",
    "Payload",
    "Priority",
    "Queue",
    "QueueFrame",
    "QueueGapFrame",
    "QueueList",
    "QueueStats",
    "RateLimit",
    "ReceiptLostError",
    "Reconnect",
    "ReconnectInfo",
    "Requeued",
    "ReservedTask",
    "Resumed",
    "Retention",
    "RetryPolicy",
    "RetryTask",
    "RunEndFrame",
    "RunEntry",
    "RunEvent",
    "RunEventFrame",
    "RunFrame",
    "RunGapFrame",
    "RunList",
    "RunStatus",
    "RunView",
    "Runs",
    "Schedule",
    "ScheduleList",
    "ServiceUnavailableError",
    "SseMessage",
    "SseParser",
    "Started",
    "StreamGap",
    "Submitted",
    "Task",
    "TaskContext",
    "TaskEnd",
    "TaskEndFrame",
    "TaskState",
    "TaskTimeoutError",
    "Ticket",
    "TicketSource",
    "TooLargeError",
    "UnauthorizedError",
    "WaitingTasks",
    "Worker",
    "WorkerList",
    "WorkerRecord",
    "WorkerStats",
    "WorkerStoppedError",
]
