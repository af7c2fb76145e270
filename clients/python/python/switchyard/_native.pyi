"""The Rust extension under the package: switchyard's ports, one class each, every I/O method a
coroutine that runs on the extension's own Tokio runtime without holding the GIL.

Most code wants the friendlier layers over it: :mod:`switchyard.agentdeck` (agentdeck's event
stores), :mod:`switchyard.fleet` (fleet-framework's backend), :mod:`switchyard.store` and
:mod:`switchyard.queue`. Values cross the boundary as ``str`` (an event as its stored JSON, a
JSON document as text) and ``bytes`` (bodies, payloads).
"""

from collections.abc import Awaitable, Callable, Sequence

__version__: str

# --- errors -------------------------------------------------------------------------------------
# The classes of `switchyard.errors`, under the names the extension raises them by.

from switchyard.errors import (
    AlreadyExistsError as AlreadyExistsError,
    ClosedError as ClosedError,
    ConfigError as ConfigError,
    ContendedError as ContendedError,
    CorruptError as CorruptError,
    InvalidInputError as InvalidInputError,
    RejectedError as RejectedError,
    SwitchyardError as SwitchyardError,
    TaskCancelledError as TaskCancelledError,
    UnavailableError as UnavailableError,
)

# --- the event store ----------------------------------------------------------------------------

async def open_event_store(url: str, *, prefix: str | None = None) -> EventStore:
    """Opens an event store by URL: ``memory://``, ``sqlite:///path`` (or ``sqlite:path``),
    ``redis://…``, ``rediss://…``, ``redis-cluster://…``, ``postgres://…`` (``?schema=``).
    ``prefix`` is the Redis key prefix (default ``agentdeck:events``, agentdeck's own)."""

class EventStore:
    """An append-only store of run events with session claims (the Rust ``EventStore`` port;
    its guarantees hold here unchanged). A run is addressed by ``namespace`` (``None`` for none),
    ``session_id`` (its log; ``None`` when the run is its own log) and ``run_id``. Payloads go
    in as JSON objects with a ``kind``; events come back as their stored JSON, byte for byte what
    agentdeck writes."""

    @property
    def backend(self) -> str:
        """``memory``, ``sqlite``, ``redis``, ``redis-cluster`` or ``postgres``."""

    async def append(
        self, namespace: str | None, session_id: str | None, run_id: str, payloads: Sequence[str], origin: str
    ) -> list[str]: ...
    async def append_if_open(
        self, namespace: str | None, session_id: str | None, run_id: str, payloads: Sequence[str], origin: str
    ) -> tuple[list[str] | None, str]:
        """``(events, status after)`` when the run was open, ``(None, status)`` when it was not
        (nothing written)."""

    async def read(
        self, namespace: str | None, session_id: str | None, run_id: str, offset: int = 0, limit: int | None = None
    ) -> list[str]: ...
    async def read_run(
        self, namespace: str | None, session_id: str | None, run_id: str, from_seq: int = 0
    ) -> list[str]: ...
    async def claim_start(
        self,
        namespace: str | None,
        session_id: str | None,
        run_id: str,
        opening: str,
        origin: str,
        stale_after_seconds: float,
    ) -> tuple[str | None, list[str], str | None]:
        """``(held_by, overridden events, the opening event when the claim won)``."""

    async def claim_resume(
        self, namespace: str | None, session_id: str | None, run_id: str, resumed: str, origin: str
    ) -> str | None: ...
    async def list_runs(self, namespace: str | None, status: str | None = None) -> list[tuple[str, str, str]]:
        """``(log_key, run_id, status)`` of every run of the namespace with a lifecycle event."""

    async def run_status(self, namespace: str | None, session_id: str | None, run_id: str) -> str: ...
    async def claim(
        self,
        namespace: str | None,
        session_id: str | None,
        run_id: str,
        opening: str,
        origin: str,
        stale_after_seconds: float,
        strategy: str,
    ) -> tuple[str, str | None, int | None, str | None, list[str], list[str]]:
        """A claim with a multitask strategy (``reject``, ``enqueue``, ``interrupt``,
        ``rollback``): ``(outcome, held_by, position, event, overridden, ended)``, ``outcome``
        being ``started``, ``held`` or ``queued``."""

    async def turn(
        self, namespace: str | None, session_id: str | None, run_id: str
    ) -> tuple[str, int | None, str | None]:
        """Where an enqueued run stands after a hand-off: ``(state, position, run.started)``,
        ``state`` being ``waiting``, ``started`` or ``not_waiting``."""

    async def hand_off(self, namespace: str | None, session_id: str) -> str | None:
        """Starts the session's next waiting run if the session is free: its ``run.started``."""

    async def leave_line(self, namespace: str | None, session_id: str, run_id: str) -> bool:
        """Takes a waiting run out of its session's line; whether it was there."""

    def close(self) -> None:
        """Later calls raise :class:`ClosedError`; calls in flight finish."""

# --- the fleet backend --------------------------------------------------------------------------

async def open_fleet_backend(url: str, *, prefix: str | None = None) -> FleetBackend:
    """Opens a fleet backend by URL: ``memory://``, ``sqlite:///path``, ``redis://…``,
    ``rediss://…``, ``redis-cluster://…``, ``postgres://…``. On Redis the keys are
    fleet-framework 0.1.0's own, behind ``prefix`` (none by default)."""

class Delivery:
    """One reservation of a task: pass ``receipt`` back to ack, nack, extend or fail it."""

    receipt: str
    body: bytes
    task_id: str | None
    attempt: int
    priority: int
    visible_until: float

class PoolItem:
    id: str
    payload: bytes
    tags: str
    """The item's tags as a JSON object."""
    expires_at: float | None
    in_use_until: float | None

class WorkerRecord:
    hardware: str
    config: str
    config_gen: int
    state: str
    last_seen: float
    last_error: str | None
    applied_gen: int | None
    stats: str

class Subscription:
    """Messages published to one topic after the subscription was made; ``async for`` it."""

    def __aiter__(self) -> Subscription: ...
    async def __anext__(self) -> bytes: ...
    def close(self) -> None: ...

class FleetBackend:
    """The fleet port: KV, pools, locks, counters, the priority job queue, dead letters, streams,
    events and the worker registry (the Rust ``FleetBackend``; its guarantees hold unchanged).
    Durations are seconds (``float``); JSON documents are ``str``; priorities are fleet's ints
    (``> 0`` high, ``0`` normal, ``< 0`` low)."""

    @property
    def backend(self) -> str: ...

    # kv
    async def kv_set(self, ns: str, key: str, value: bytes, ttl_seconds: float | None = None) -> None: ...
    async def kv_set_nx(self, ns: str, key: str, value: bytes, ttl_seconds: float | None = None) -> bool: ...
    async def kv_get(self, ns: str, key: str) -> bytes | None: ...
    async def kv_del(self, ns: str, key: str) -> bool: ...
    # pools
    async def pool_put(
        self, name: str, item_id: str, payload: bytes, tags: str, ttl_seconds: float | None = None
    ) -> None: ...
    async def pool_list(self, name: str) -> list[PoolItem]: ...
    async def pool_size(self, name: str) -> int: ...
    async def pool_remove(self, name: str, item_id: str) -> bool: ...
    async def pool_release(self, name: str, item_id: str, token: str) -> bool: ...
    async def pool_claim_any(self, name: str, where: str, hold_seconds: float) -> tuple[PoolItem, str] | None:
        """The claimed item and the token that releases it."""
    # locks
    async def lock_acquire(self, name: str, hold_seconds: float, wait_seconds: float) -> tuple[str, int] | None:
        """``(token, fence)`` when granted."""
    async def lock_release(self, name: str, token: str) -> bool: ...
    async def lock_extend(self, name: str, token: str, hold_seconds: float) -> bool: ...
    # counters
    async def counter_incr(self, name: str, by: int = 1) -> int: ...
    async def counter_get(self, name: str) -> int: ...
    async def counter_set(self, name: str, value: int) -> None: ...
    async def counter_del(self, name: str) -> bool: ...
    # the job queue
    async def queue_push(self, name: str, body: bytes, priority: int = 0) -> None: ...
    async def queue_submit(
        self,
        name: str,
        body: bytes,
        *,
        priority: int = 0,
        delay_seconds: float | None = None,
        at: float | None = None,
        idem_ns: str | None = None,
        idem_key: str | None = None,
        idem_value: bytes | None = None,
        idem_ttl_seconds: float | None = None,
    ) -> bytes | None:
        """``None`` when enqueued (now, or scheduled by ``delay_seconds`` or the epoch seconds
        ``at``); with an idempotency key (``idem_ns`` and ``idem_key``) a duplicate enqueues
        nothing and returns the stored value."""
    async def queue_size(self, name: str) -> int: ...
    async def queue_stats(self, name: str) -> dict[str, int | bool | dict[str, int] | None]:
        """Counts (``high``, ``normal``, ``low``, ``waiting``, ``in_flight``, ``overdue``,
        ``scheduled``, ``due``, ``dead``, ``completed``, ``failed``, ``dead_lettered``,
        ``cancelled``, ``throttled_ms``), ``paused`` (bool) and ``rate_limit`` (``None`` or
        ``{"max", "per_ms"}``), read in one consistent snapshot."""
    async def queue_peek(self, name: str, n: int) -> list[bytes]: ...
    async def queue_reserve(self, name: str, timeout_seconds: float, visibility_seconds: float) -> Delivery | None: ...
    async def queue_reserve_many(
        self, name: str, max: int, timeout_seconds: float, visibility_seconds: float
    ) -> list[Delivery]: ...
    async def queue_ack(self, name: str, receipt: str) -> bool: ...
    async def queue_ack_many(self, name: str, receipts: Sequence[str]) -> list[bool]: ...
    async def queue_nack(self, name: str, receipt: str, body: bytes, delay_seconds: float = 0.0) -> bool: ...
    async def queue_extend(self, name: str, receipt: str, visibility_seconds: float) -> bool: ...
    async def queue_fail(self, name: str, receipt: str, body: bytes) -> bool: ...
    async def queue_sweep_expired(self, name: str) -> int: ...
    async def queue_promote_due(self, name: str) -> int: ...
    async def queue_dead(self, name: str, body: bytes) -> None: ...
    async def queue_names(self) -> list[str]: ...
    # dead letters
    async def dlq_peek(self, name: str, n: int) -> list[bytes]: ...
    async def dlq_pop(self, name: str, n: int) -> list[bytes]: ...
    async def dlq_length(self, name: str) -> int: ...
    async def dlq_clear(self, name: str) -> int: ...
    async def dlq_requeue(self, name: str, n: int, priority: int = 0) -> int: ...
    # streams
    async def stream_push(
        self, name: str, envelope: bytes, score: float, max_len: int, ttl_seconds: float | None = None
    ) -> None: ...
    async def stream_pop(self, name: str, n: int) -> list[bytes]: ...
    async def stream_peek(self, name: str, n: int) -> list[bytes]: ...
    async def stream_length(self, name: str) -> int: ...
    async def stream_trim(self, name: str, max_len: int, ttl_seconds: float | None = None) -> None: ...
    # events
    async def event_publish(self, topic: str, body: bytes) -> None: ...
    async def event_subscribe(self, topic: str) -> Subscription: ...
    # the worker registry
    async def worker_register(self, automation_type: str, worker_id: str, hardware: str) -> None: ...
    async def worker_get_config(self, automation_type: str, worker_id: str) -> tuple[str, int]: ...
    async def worker_set_config(
        self, automation_type: str, worker_id: str, config: str, expected_gen: int | None = None
    ) -> tuple[str, int | None]:
        """``("applied", generation)``, ``("gen_mismatch", current)`` or ``("not_registered", None)``."""
    async def worker_set_state(
        self,
        automation_type: str,
        worker_id: str,
        state: str,
        last_error: str | None,
        last_seen: float,
        applied_gen: int | None = None,
    ) -> bool: ...
    async def worker_set_stats(self, automation_type: str, worker_id: str, stats: str) -> bool: ...
    async def worker_stats_push(
        self, automation_type: str, worker_id: str, ts: float, frame: str, max_entries: int = 240
    ) -> bool: ...
    async def worker_stats_history(
        self, automation_type: str, worker_id: str, since: float = 0.0, limit: int = 240
    ) -> list[str]: ...
    async def worker_get(self, automation_type: str, worker_id: str) -> WorkerRecord | None: ...
    async def worker_list(self, automation_type: str | None = None) -> list[tuple[str, str]]: ...
    async def worker_remove(self, automation_type: str, worker_id: str) -> bool: ...
    # the catalog
    async def catalog_set(self, automation_type: str, doc: bytes) -> None: ...
    async def catalog_get(self, automation_type: str) -> bytes | None: ...
    async def catalog_all(self) -> dict[str, bytes]: ...
    def close(self) -> None: ...

# --- the stream bridge --------------------------------------------------------------------------

async def open_stream_bridge(url: str, *, prefix: str | None = None, retention: int | None = None) -> StreamBridge:
    """Opens a stream bridge by URL: ``memory://``, ``redis://…``, ``rediss://…``,
    ``redis-cluster://…``, ``postgres://…``. ``prefix`` is the Redis key prefix (default
    ``deerflow:stream_bridge``, deer-flow's own); ``retention`` the events kept per run."""

class StreamItem:
    """One item of a subscription. ``kind`` is ``"event"`` (``id``, ``event``, ``data`` as JSON
    text), ``"heartbeat"``, ``"end"`` or ``"gap"`` (``requested``, ``earliest``, ``latest``: the
    cursor cannot be replayed completely; reload durable state)."""

    kind: str
    id: str | None
    event: str | None
    data: str | None
    requested: str | None
    earliest: str | None
    latest: str | None

class StreamSubscription:
    """Items in order; it stops after an ``end`` or a ``gap`` item."""

    def __aiter__(self) -> StreamSubscription: ...
    async def __anext__(self) -> StreamItem: ...

class StreamBridge:
    """Live per-run event streams for Server-Sent Events (the Rust ``StreamBridge`` port)."""

    @property
    def backend(self) -> str: ...
    async def publish(self, run_id: str, event: str, data: str) -> str:
        """Appends one event (``data`` is JSON text); its id, the SSE cursor."""
    async def publish_end(self, run_id: str) -> None: ...
    def subscribe(
        self, run_id: str, last_event_id: str | None = None, heartbeat_seconds: float = 15.0
    ) -> StreamSubscription:
        """Follows ``run_id`` after ``last_event_id`` (the SSE ``Last-Event-ID``)."""
    async def cleanup(self, run_id: str, delay_seconds: float = 0.0) -> None: ...
    async def stream_exists(self, run_id: str) -> bool: ...
    async def aclose(self) -> None: ...

# --- the checkpoint cache -----------------------------------------------------------------------

async def open_checkpoint_cache(url: str) -> CheckpointCache:
    """Opens a checkpoint cache by URL: ``memory://`` or ``redis://…`` (deer-flow's keys)."""

class CheckpointCache:
    """A cache of immutable checkpoint-history entries whose failures are misses, never errors
    (the Rust ``CheckpointCache`` port). Entries are ``(tag, payload)``: a serializer's type tag
    and its bytes, kept byte for byte."""

    @property
    def backend(self) -> str: ...
    async def get_many(self, keys: Sequence[str]) -> dict[str, tuple[str, bytes]]: ...
    async def set_many(self, entries: Sequence[tuple[str, str, bytes]]) -> None: ...
    async def delete_thread(self, key_prefix: str, thread_id: str) -> None: ...
    def stats(self) -> dict[str, int]:
        """``hits``, ``misses``, ``evictions``, ``entries`` of this instance."""
    async def aclose(self) -> None: ...

# --- the typed queue and its worker loop (used by switchyard.queue) -----------------------------

class Task:
    id: str
    payload: str
    """JSON text."""
    attempt: int
    last_error: str | None

class Consumer:
    def stats(self) -> dict[str, int] | None: ...
    async def wait_idle(self) -> None: ...
    async def shutdown(self) -> dict[str, int] | None: ...

class Queue:
    def __init__(self, fleet: FleetBackend, name: str) -> None: ...
    @property
    def name(self) -> str: ...
    async def push(
        self,
        payload: str,
        *,
        id: str | None = None,
        priority: int = 0,
        ttl_seconds: int | None = None,
        max_attempts: int | None = None,
        timeout_seconds: float | None = None,
    ) -> str: ...
    async def get(self, id: str) -> dict[str, object] | None: ...
    async def cancel(self, id: str) -> str: ...
    async def stats(self) -> dict[str, object]: ...
    async def dead_letters(self, n: int) -> list[bytes]: ...
    def consume(
        self,
        handler: Callable[[Task], Awaitable[object]],
        *,
        concurrency: int = 1,
        visibility_seconds: float = 300.0,
        max_attempts: int = 3,
        timeout_seconds: float | None = None,
        shutdown_grace_seconds: float = 30.0,
        cancel_grace_seconds: float = 10.0,
    ) -> Consumer: ...
