"""The gateway's answers, as :class:`~typing.TypedDict` s named after the schemas of its OpenAPI
document (``clients/typescript/openapi.json``, the output of ``switchyard openapi``).

Answers are the decoded JSON, unchanged: a key the gateway adds in a later version is there too,
just not typed. Keys the document does not list as required are :data:`~typing.NotRequired`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, NotRequired, TypeAlias, TypedDict

__all__ = [
    "AckItem",
    "AckOutcome",
    "AckedMany",
    "AppendedEvents",
    "Block",
    "CancelAnswer",
    "CancelResult",
    "Cancelled",
    "DeadLetterList",
    "Deleted",
    "EventsPage",
    "InFlightList",
    "InFlightTask",
    "Json",
    "JsonInput",
    "Keep",
    "LastError",
    "Nacked",
    "PauseState",
    "Payload",
    "Priority",
    "QueueList",
    "QueueStats",
    "RateLimit",
    "Requeued",
    "Reservations",
    "ReservedTask",
    "Resumed",
    "Retention",
    "RetryPolicy",
    "RunEntry",
    "RunEvent",
    "RunList",
    "RunStatus",
    "RunView",
    "Schedule",
    "ScheduleList",
    "SchemaVersion",
    "Started",
    "Submitted",
    "Task",
    "TaskEnd",
    "TaskState",
    "Ticket",
    "Tiers",
    "WaitingTasks",
    "WorkerList",
    "WorkerRecord",
]

Json: TypeAlias = "None | bool | int | float | str | list[Json] | dict[str, Json]"
"""Any JSON value, as :func:`json.loads` returns it."""

JsonInput: TypeAlias = "None | bool | int | float | str | Sequence[JsonInput] | Mapping[str, JsonInput]"
"""Any JSON value to send: mappings and sequences of JSON values (serialised with
:func:`json.dumps`; ``NaN`` and infinities are refused, as JSON has none)."""

Payload: TypeAlias = Mapping[str, object]
"""A run event's payload: an object whose ``kind`` names one of the event model's 21 kinds
(``text.delta``, ``run.completed``, …) and whose other keys are that kind's (the ``Payload``
schema of ``/openapi.json``). An unknown kind is refused with 422 on ``kind``."""

Block: TypeAlias = Mapping[str, object]
"""A content block, tagged by ``type``: ``{"type": "text", "text": …}``, ``image``, ``audio``,
``resource``, ``data``."""

RunStatus: TypeAlias = Literal["pending", "running", "paused", "waiting_human", "completed", "failed", "cancelled"]
"""Where a run stands."""

TaskState: TypeAlias = Literal["scheduled", "waiting", "running", "completed", "failed", "dead", "cancelled"]
"""Where a task is in its life."""

Priority: TypeAlias = "Literal['high', 'normal', 'low'] | int"
"""A task's tier: ``high``, ``normal``, ``low``, or an integer (positive high, zero normal,
negative low)."""


# --- runs ---------------------------------------------------------------------------------------


class SchemaVersion(TypedDict):
    major: int
    minor: int


class RunEvent(TypedDict):
    """One stored event of a run's log (the ``Event`` schema): the store assigned ``seq`` and ``ts``."""

    v: SchemaVersion
    kind: str
    seq: int
    run_id: str
    session_id: str | None
    namespace: str | None
    origin: str
    ts: str
    payload: dict[str, Json]


class Started(TypedDict):
    """A started run."""

    run_id: str
    log_key: str
    status: RunStatus
    event: RunEvent
    overridden: list[str]
    """The stale runs the claim closed with ``run.failed`` (``cancelled_hard``)."""
    session_id: NotRequired[str | None]
    namespace: NotRequired[str | None]


class AppendedEvents(TypedDict):
    """Events stored by an append, and the run's status after it."""

    run_id: str
    status: RunStatus
    events: list[RunEvent]


class Resumed(TypedDict):
    """A resumed run: its stored ``run.resumed`` event."""

    run_id: str
    status: RunStatus
    event: RunEvent


class RunView(TypedDict):
    """A run read from the store: its status (folded from all its lifecycle events) and its
    events from ``from_seq``."""

    run_id: str
    log_key: str
    status: RunStatus
    events: list[RunEvent]
    session_id: NotRequired[str | None]
    namespace: NotRequired[str | None]


class RunEntry(TypedDict):
    run_id: str
    log_key: str
    status: RunStatus
    session_id: NotRequired[str | None]


class RunList(TypedDict):
    runs: list[RunEntry]
    namespace: NotRequired[str | None]


class Ticket(TypedDict):
    """A stream ticket: pass it as ``ticket=`` when following the run, instead of a token."""

    ticket: str
    expires_in: int


# --- queues and tasks ---------------------------------------------------------------------------


class RetryPolicy(TypedDict, total=False):
    """A task's retry policy: after failed attempt ``a``, ``fixed`` waits ``base_seconds``,
    ``exponential`` ``base_seconds · 2^(a−1)``, both at most ``cap_seconds``; ``jitter`` takes a
    random share (``none``, ``full``, ``equal``)."""

    backoff: Literal["fixed", "exponential"]
    base_seconds: float
    cap_seconds: float
    jitter: Literal["none", "full", "equal"]


class Submitted(TypedDict):
    """A submitted task; ``duplicate`` when its idempotency key was already used."""

    queue: str
    id: str
    duplicate: bool


class Task(TypedDict):
    """A task's record (the ``TaskJson`` schema). Times are unix seconds on the backend's clock."""

    id: str
    state: TaskState
    cancel_requested: bool
    attempt: int
    priority: str
    submitted_at: float
    progress: Json
    result: Json
    foreign: bool
    events_cursor: str
    max_attempts: NotRequired[int | None]
    started_at: NotRequired[float | None]
    finished_at: NotRequired[float | None]
    visible_until: NotRequired[float | None]
    last_error: NotRequired[str | None]
    progress_base64: NotRequired[str | None]
    result_base64: NotRequired[str | None]


class Cancelled(TypedDict):
    """What a cancel did: ``cancelled`` (it will never run), ``cancel_requested`` (it runs: its
    worker is told) or ``finished`` (it had ended)."""

    outcome: str
    state: TaskState


class CancelResult(TypedDict):
    id: str
    outcome: str
    state: NotRequired[TaskState | None]


class CancelAnswer(TypedDict, total=False):
    """A bulk cancel's answer: ``results`` for ids, ``purged`` for a purge."""

    results: list[CancelResult] | None
    purged: int | None


class TaskEnd(TypedDict):
    """One end on the queue's event log (the ``TaskEventJson`` schema)."""

    cursor: str
    task_id: str
    state: TaskState
    attempt: int
    at: float
    result: Json
    result_size: int
    error: NotRequired[str | None]
    result_base64: NotRequired[str | None]


class EventsPage(TypedDict):
    queue: str
    events: list[TaskEnd]
    gap: bool
    cursor: str


class QueueList(TypedDict):
    queues: list[str]


class Tiers(TypedDict):
    high: int
    normal: int
    low: int


class RateLimit(TypedDict):
    max: int
    per_seconds: float


class QueueStats(TypedDict):
    """Every count of a queue, from one snapshot."""

    queue: str
    waiting: int
    tiers: Tiers
    in_flight: int
    overdue: int
    scheduled: int
    due: int
    dead: int
    dead_letters: int
    paused: bool
    throttled_ms: int
    rate_limit: NotRequired[RateLimit | None]
    completed: NotRequired[int]
    failed: NotRequired[int]
    dead_lettered: NotRequired[int]
    cancelled: NotRequired[int]


class WaitingTasks(TypedDict):
    queue: str
    tasks: list[Json]


class InFlightTask(TypedDict):
    """A reservation as an observer sees it (no receipt)."""

    attempt: int
    priority: str
    visible_until: float
    progress: Json
    payload: Json
    id: NotRequired[str | None]


class InFlightList(TypedDict):
    in_flight: list[InFlightTask]


class DeadLetterList(TypedDict):
    """Dead letters, oldest first: each the decoded body plus ``ref``, which names it to a requeue."""

    queue: str
    total: int
    dead_letters: list[dict[str, Json]]


class Requeued(TypedDict):
    queue: str
    requeued: int
    missing: list[str]


class PauseState(TypedDict):
    queue: str
    paused: bool
    changed: bool


class Keep(TypedDict):
    """What one kind of finished record (or the event log) keeps."""

    count: int
    age_seconds: float


class Retention(TypedDict):
    completed: Keep
    failed: Keep
    events: Keep


# --- workers and schedules ----------------------------------------------------------------------


class WorkerRecord(TypedDict):
    """A registered worker as listed."""

    automation_type: str
    worker_id: str
    state: str
    last_seen: float
    config_gen: int
    config: dict[str, Json]
    hardware: dict[str, Json]
    stats: dict[str, Json]
    applied_gen: NotRequired[int | None]
    last_error: NotRequired[str | None]


class WorkerList(TypedDict):
    workers: list[WorkerRecord]


class Schedule(TypedDict):
    """A schedule as stored: its name and its document (``cron``, ``timezone``, ``queue``,
    ``payload``, ``priority``, ``catch_up``, ``enabled``, ``created_at``)."""

    name: str
    spec: dict[str, Json]


class ScheduleList(TypedDict):
    schedules: list[Schedule]


class Deleted(TypedDict):
    name: str
    deleted: bool


# --- the HTTP worker API ------------------------------------------------------------------------


class LastError(TypedDict):
    """The failure a previous attempt recorded."""

    message: str
    attempt: int
    at: float


class ReservedTask(TypedDict):
    """One reservation: pass its ``receipt`` back to ack, nack, fail, extend or report progress."""

    receipt: str
    payload: Json
    attempt: int
    max_attempts: int
    priority: str
    visible_until: float
    id: NotRequired[str | None]
    deadline: NotRequired[float | None]
    last_error: NotRequired[LastError | None]
    malformed: NotRequired[str | None]
    retry: NotRequired[dict[str, Json] | None]


class Reservations(TypedDict):
    """The reservations handed out (empty when nothing was due)."""

    tasks: list[ReservedTask]


class AckItem(TypedDict):
    """One ack of a batch: a receipt, and the task's result if it has one."""

    receipt: str
    result: NotRequired[JsonInput]


class AckOutcome(TypedDict):
    """What became of one ack of a batch (``ok: false`` with the error the ack route would answer)."""

    receipt: str
    ok: bool
    status: NotRequired[int | None]
    error: NotRequired[str | None]
    message: NotRequired[str | None]


class AckedMany(TypedDict):
    results: list[AckOutcome]


class Nacked(TypedDict):
    """What a nack did: ``dead_lettered`` when it was the task's last attempt."""

    ok: bool
    dead_lettered: bool
    attempt: int
    max_attempts: int
