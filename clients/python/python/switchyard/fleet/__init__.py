"""A fleet-framework 0.1.0 backend on switchyard, loaded by fleet's own ``backend_from_url``.

Installing ``switchyard-py[fleet]`` registers these schemes in the ``fleet.backends``
entry-point group, so every place fleet takes a backend URL (``fleet master --backend-url``,
``fleet worker --backend-url``, ``create_app(backend_url)``, ``FLEET_BACKEND_URL``) accepts them:

- ``switchyard+redis://host:6379/0`` (``+rediss``, ``+redis-cluster``) — fleet's own Redis key
  layout: a fleet ``RedisBackend`` and this backend share one Redis and each other's tasks;
- ``switchyard+sqlite:///path/to/fleet.db``;
- ``switchyard+postgres://user@host/db`` (``+postgresql``; ``?schema=NAME``);
- ``switchyard+memory://`` (one process).

The object :func:`backend_from_url` returns implements fleet's ``Backend`` protocol method by
method (see :class:`SwitchyardBackend` for the few answers that differ from fleet's
``RedisBackend``, and why) and ``aclose()``; ``await backend.native()`` is the underlying
:class:`switchyard.FleetBackend` with what the protocol lacks (stats, delayed submits, fenced
locks, dead-letter requeue).
"""

from switchyard.fleet._backend import STALE_AFTER_SECONDS, SwitchyardBackend, backend_from_url
from switchyard.fleet._events import EventClient, PubSub
from switchyard.fleet._url import SCHEMES, native_url

__all__ = [
    "SCHEMES",
    "STALE_AFTER_SECONDS",
    "EventClient",
    "PubSub",
    "SwitchyardBackend",
    "backend_from_url",
    "native_url",
]
