"""switchyard for Python: the event store, fleet backend and gateway client of
switchyard (a Rust persistence and coordination layer for agent platforms), for asyncio.

- :mod:`switchyard.agentdeck` — drop-ins for agentdeck's Redis, SQLite and PostgreSQL event
  stores (the ``agentdeck`` extra);
- :mod:`switchyard.fleet` — a fleet-framework backend, loaded by ``backend_from_url`` for
  ``switchyard+redis://``, ``switchyard+sqlite://``, ``switchyard+postgres://`` URLs (the
  ``fleet`` extra);
- :func:`open_event_store`, :func:`open_stream_bridge`, :func:`open_checkpoint_cache` and
  :func:`open_fleet_backend` — the four ports themselves, by URL; :class:`switchyard.queue.Queue`
  — a typed job queue with a worker loop over the fleet backend;
- :mod:`switchyard.gateway` — an HTTP client for a running ``switchyard serve``.

Every I/O call is a coroutine that runs in Rust without holding the GIL.
"""

from typing import TYPE_CHECKING, Any

from switchyard import errors
from switchyard.errors import (
    AlreadyExistsError,
    ClosedError,
    ConfigError,
    ContendedError,
    CorruptError,
    InvalidInputError,
    RejectedError,
    SwitchyardError,
    TaskCancelledError,
    UnavailableError,
)

# The extension loads on first use of one of its names, so `switchyard.gateway` (pure Python)
# and `switchyard.errors` import without it.
_NATIVE = frozenset(
    {
        "CheckpointCache",
        "Delivery",
        "EventStore",
        "FleetBackend",
        "PoolItem",
        "StreamBridge",
        "StreamItem",
        "StreamSubscription",
        "Subscription",
        "WorkerRecord",
        "__version__",
        "open_checkpoint_cache",
        "open_event_store",
        "open_fleet_backend",
        "open_stream_bridge",
    }
)

if TYPE_CHECKING:
    from switchyard._native import (
        CheckpointCache,
        Delivery,
        EventStore,
        FleetBackend,
        PoolItem,
        StreamBridge,
        StreamItem,
        StreamSubscription,
        Subscription,
        WorkerRecord,
        __version__,
        open_checkpoint_cache,
        open_event_store,
        open_fleet_backend,
        open_stream_bridge,
    )


def __getattr__(name: str) -> Any:
    if name in _NATIVE:
        from switchyard import _native

        return getattr(_native, name)
    raise AttributeError(f"module 'switchyard' has no attribute {name!r}")


__all__ = [
    "AlreadyExistsError",
    "CheckpointCache",
    "ClosedError",
    "ConfigError",
    "ContendedError",
    "CorruptError",
    "Delivery",
    "EventStore",
    "FleetBackend",
    "InvalidInputError",
    "PoolItem",
    "RejectedError",
    "StreamBridge",
    "StreamItem",
    "StreamSubscription",
    "Subscription",
    "SwitchyardError",
    "TaskCancelledError",
    "UnavailableError",
    "WorkerRecord",
    "__version__",
    "errors",
    "open_checkpoint_cache",
    "open_event_store",
    "open_fleet_backend",
    "open_stream_bridge",
]
