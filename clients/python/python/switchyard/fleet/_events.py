"""The part of a ``redis.asyncio.Redis`` client that fleet-framework's ``EventBus`` uses.

fleet's worker builds every slot's event bus as ``EventBus(backend.r)`` (``fleet/worker/
slot_runner.py``), reaching past the ``Backend`` protocol to ``RedisBackend``'s client: it calls
``r.publish(f"event:{topic}", text)`` and ``r.pubsub()`` (``subscribe``, ``listen``,
``unsubscribe``, ``aclose``). :class:`EventClient` answers exactly those calls with the native
backend's ``event_publish`` and ``event_subscribe``, so ``ctx.events`` works on every switchyard
backend (SQLite and PostgreSQL included) and, on Redis, on the same ``event:{topic}`` channels a
fleet ``RedisBackend`` uses. Anything else a Redis client has is absent on purpose.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from switchyard._native import FleetBackend, Subscription

CHANNEL_PREFIX = "event:"


def _topic(channel: str | bytes) -> str:
    name = channel.decode("utf-8") if isinstance(channel, bytes) else str(channel)
    if not name.startswith(CHANNEL_PREFIX) or len(name) == len(CHANNEL_PREFIX):
        raise ValueError(
            f"switchyard's fleet backend carries fleet's event channels only ('event:<topic>'), not {name!r}: "
            "publish with backend.event_publish(topic, body) or fleet's EventBus"
        )
    return name[len(CHANNEL_PREFIX) :]


def _as_bytes(message: Any) -> bytes:
    if isinstance(message, bytes):
        return message
    if isinstance(message, (bytearray, memoryview)):
        return bytes(message)
    if isinstance(message, str):
        return message.encode("utf-8")
    if isinstance(message, (int, float)) and not isinstance(message, bool):
        return repr(message).encode("ascii")
    raise TypeError(
        f"an event body is bytes, str, int or float (as redis-py encodes them), not {type(message).__name__}"
    )


class EventClient:
    """``backend.r`` of :class:`switchyard.fleet.SwitchyardBackend`: ``publish`` and ``pubsub``."""

    def __init__(self, native: Callable[[], Awaitable[FleetBackend]]) -> None:
        self._native = native

    async def publish(self, channel: str | bytes, message: Any) -> None:
        """Publishes ``message`` on ``event:<topic>``. Returns ``None``: the native backend does not
        count receivers (redis-py returns their number)."""
        topic = _topic(channel)
        body = _as_bytes(message)
        await (await self._native()).event_publish(topic, body)

    def pubsub(self) -> PubSub:
        return PubSub(self._native)


class PubSub:
    """A subscription to ``event:<topic>`` channels, read as redis-py's ``PubSub.listen()`` yields
    messages: ``{"type": "message", "pattern": None, "channel": b"event:<topic>", "data": b"…"}``.
    Only messages are yielded (no ``subscribe`` confirmations: fleet's ``EventBus`` skips them)."""

    def __init__(self, native: Callable[[], Awaitable[FleetBackend]]) -> None:
        self._native = native
        self._subs: dict[str, Subscription] = {}
        self._inbox: asyncio.Queue[dict[str, Any]] | None = None
        self._pumps: dict[str, asyncio.Task[None]] = {}

    @property
    def subscribed(self) -> bool:
        return bool(self._subs)

    async def subscribe(self, *channels: str | bytes) -> None:
        native = await self._native()
        for channel in channels:
            topic = _topic(channel)
            if topic not in self._subs:
                self._subs[topic] = await native.event_subscribe(topic)
                if self._inbox is not None:
                    self._start_pump(topic)

    async def unsubscribe(self, *channels: str | bytes) -> None:
        topics = [_topic(c) for c in channels] if channels else list(self._subs)
        for topic in topics:
            sub = self._subs.pop(topic, None)
            if sub is not None:
                sub.close()
            pump = self._pumps.pop(topic, None)
            if pump is not None:
                pump.cancel()

    async def aclose(self) -> None:
        await self.unsubscribe()

    close = aclose

    def _start_pump(self, topic: str) -> None:
        inbox = self._inbox
        sub = self._subs[topic]
        assert inbox is not None
        channel = (CHANNEL_PREFIX + topic).encode("utf-8")

        async def pump() -> None:
            async for body in sub:
                await inbox.put({"type": "message", "pattern": None, "channel": channel, "data": body})

        self._pumps[topic] = asyncio.create_task(pump(), name=f"switchyard-event-{topic}")

    async def listen(self) -> AsyncIterator[dict[str, Any]]:
        """Yields every message of the subscribed topics, in order per topic, until unsubscribed."""
        if self._inbox is None:
            self._inbox = asyncio.Queue()
            for topic in self._subs:
                self._start_pump(topic)
        inbox = self._inbox
        while self._subs or not inbox.empty():
            getter = asyncio.ensure_future(inbox.get())
            pumps = list(self._pumps.values())
            done, _ = await asyncio.wait([getter, *pumps], return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                yield getter.result()
                continue
            getter.cancel()
            for pump in done:
                for topic, task in list(self._pumps.items()):
                    if task is pump:
                        # The subscription ended (closed, or the backend closed): stop reading it.
                        del self._pumps[topic]
                        self._subs.pop(topic, None)
                if not pump.cancelled() and pump.exception() is not None:
                    raise pump.exception()  # type: ignore[misc]
