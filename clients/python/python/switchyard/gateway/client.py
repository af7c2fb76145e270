"""The client: one gateway, its runs and its queues, over one :class:`httpx.AsyncClient`."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Literal, Self, cast

import httpx

from switchyard.gateway._http import DEFAULT_TIMEOUT, Transport, seg
from switchyard.gateway.queues import Queue
from switchyard.gateway.runs import Runs
from switchyard.gateway.types import Deleted, JsonInput, QueueList, Schedule, ScheduleList, WorkerList

__all__ = ["Client"]


class Client:
    """A switchyard gateway: its runs (:attr:`runs`) and its queues (:meth:`queue`).

    ``base_url`` is the gateway's address (``http://127.0.0.1:8080``), or the path an application
    mounted the gateway's router at. ``token`` is a secret of the gateway's token file, sent as
    ``Authorization: Bearer …``. ``timeout`` is the seconds a request may take (long polls add the
    wait they ask for; a stream's timeout covers its head only). ``transport`` is an httpx
    transport to send through (``httpx.AsyncHTTPTransport(verify=…)``, a proxy, retries), and
    ``headers`` are sent with every request.

    Use it as an async context manager, or call :meth:`aclose` when done::

        async with Client("http://127.0.0.1:8080", token=secret) as client:
            started = await client.runs.start(invocable="helper", kind_of_invocable="agent")
            await client.queue("jobs").submit({"url": "https://example.org"})
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._t = Transport(base_url, token=token, timeout=timeout, headers=headers, transport=transport)
        self.runs = Runs(self._t)
        """Runs: start, append, resume, read, list, stream tickets, follow."""

    def __repr__(self) -> str:
        # Never the token.
        return f"Client({self.base_url!r}, token={'set' if self._t.has_token else None})"

    @property
    def base_url(self) -> str:
        """The gateway's address, without a trailing slash."""
        return self._t.base_url

    @property
    def http(self) -> httpx.AsyncClient:
        """The underlying httpx client (for routes this client does not wrap)."""
        return self._t.client

    def queue(self, name: str) -> Queue:
        """A queue by name (nothing is sent until a method is called)."""
        return Queue(self._t, name)

    async def queues(self) -> QueueList:
        """The queues holding a task in any state, or watched, that the token may see."""
        return cast(QueueList, await self._t.json("GET", "/v1/queues"))

    async def workers(self, *, automation_type: str | None = None) -> WorkerList:
        """The worker registry (optionally of one automation type)."""
        query = {"automation_type": automation_type}
        return cast(WorkerList, await self._t.json("GET", "/v1/workers", query=query))

    async def schedules(self) -> ScheduleList:
        """Every recurring schedule."""
        return cast(ScheduleList, await self._t.json("GET", "/v1/schedules"))

    async def schedule(self, name: str) -> Schedule:
        """One schedule by name (:class:`~switchyard.gateway.NotFoundError` when there is none)."""
        return cast(Schedule, await self._t.json("GET", f"/v1/schedules/{seg(name)}"))

    async def put_schedule(
        self,
        name: str,
        *,
        cron: str,
        queue: str,
        payload: JsonInput = None,
        timezone: str | None = None,
        priority: int | None = None,
        catch_up: Literal["latest", "skip"] | None = None,
        enabled: bool | None = None,
        created_at: float | None = None,
    ) -> Schedule:
        """Creates or replaces a schedule: ``cron`` with seconds (``0 */5 * * * *``), ``timezone``
        (IANA, default UTC), the ``queue`` and ``payload`` of the tasks it submits. Every gateway
        running a scheduler fires it, each tick exactly once."""
        spec = {
            "cron": cron,
            "queue": queue,
            "payload": payload,
            "timezone": timezone,
            "priority": priority,
            "catch_up": catch_up,
            "enabled": enabled,
            "created_at": created_at,
        }
        body = {k: v for k, v in spec.items() if v is not None}
        return cast(Schedule, await self._t.json("PUT", f"/v1/schedules/{seg(name)}", body=body))

    async def delete_schedule(self, name: str) -> Deleted:
        """Deletes a schedule; ``deleted`` says whether one of that name existed."""
        return cast(Deleted, await self._t.json("DELETE", f"/v1/schedules/{seg(name)}"))

    async def aclose(self) -> None:
        """Closes the connections."""
        await self._t.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
