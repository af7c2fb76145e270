"""Server-Sent Events: a parser that follows the WHATWG rules, and a follower that reconnects
with ``Last-Event-ID`` (the gateway replays exactly the events after it), watches the heartbeats,
honours ``Retry-After``, and stops on the frames that end a subscription.
"""

from __future__ import annotations

import asyncio
import codecs
import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Self, TypeAlias, TypeVar

import httpx

from switchyard.gateway._http import Query, Transport
from switchyard.gateway.errors import GatewayError, NetworkError, UnauthorizedError

__all__ = ["Follow", "Reconnect", "ReconnectInfo", "SseMessage", "SseParser", "TicketSource"]

F = TypeVar("F")


@dataclass(frozen=True, slots=True)
class SseMessage:
    """One SSE message as sent: its ``event:`` name, its ``data:`` lines joined, its own ``id:``."""

    event: str
    data: str
    id: str | None = None
    """The ``id:`` line of this message, if it had one."""


class SseParser:
    """Splits a stream into messages; comments (the gateway's ``: heartbeat``) are counted, not
    returned. Lines end with LF, CRLF or CR, and a chunk may end anywhere: in a line, between the
    CR and LF of one line end, or (for bytes) inside a UTF-8 character. A leading byte-order mark
    is dropped."""

    def __init__(self) -> None:
        self._buffer = ""
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self._saw_cr = False
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")("replace")
        self.comments = 0
        """Comment lines seen (the gateway's heartbeats)."""

    def push(self, chunk: str | bytes) -> list[SseMessage]:
        """Feeds a chunk (text, or UTF-8 bytes as they came off the wire); returns the messages
        it completed."""
        text = self._decoder.decode(chunk) if isinstance(chunk, bytes) else chunk
        out: list[SseMessage] = []
        if not text:
            return out
        # A CR ending the previous chunk and an LF starting this one are one line break.
        if self._saw_cr and text.startswith("\n"):
            text = text[1:]
        self._saw_cr = text.endswith("\r")
        buffer = self._buffer + text
        start = 0
        i = 0
        n = len(buffer)
        while i < n:
            c = buffer[i]
            if c == "\n" or c == "\r":
                line = buffer[start:i]
                if c == "\r" and i + 1 < n and buffer[i + 1] == "\n":
                    i += 1
                start = i + 1
                self._line(line, out)
            i += 1
        self._buffer = buffer[start:]
        return out

    def _line(self, line: str, out: list[SseMessage]) -> None:
        if line == "":
            if self._data or self._event or self._id is not None:
                out.append(SseMessage(self._event or "message", "\n".join(self._data), self._id))
            self._event = ""
            self._data = []
            self._id = None
            return
        if line.startswith(":"):
            self.comments += 1
            return
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
        elif field == "id" and "\0" not in value:
            self._id = value
        # `retry` and unknown fields are ignored: the follower has its own backoff.


@dataclass(frozen=True, slots=True)
class Reconnect:
    """How a follower reconnects."""

    initial_delay: float = 0.25
    """First wait before reconnecting, in seconds; doubles up to :attr:`max_delay`."""
    max_delay: float = 5.0
    """Longest wait between attempts, in seconds."""
    max_attempts: int | None = None
    """Failed attempts in a row before the follower gives up and raises the last error (``None``:
    it follows until the stream ends or the caller stops iterating)."""
    idle_timeout: float = 45.0
    """Seconds without a byte (events or heartbeats) after which the connection is taken for dead
    and reopened: three of the gateway's 15-second heartbeats."""


@dataclass(frozen=True, slots=True)
class ReconnectInfo:
    """Why a follower reconnects, told to ``on_reconnect``."""

    attempt: int
    """Failed attempts in a row, this one included."""
    last_event_id: str | None
    """Where the next connection resumes."""
    error: GatewayError
    """Why the connection ended (a :class:`NetworkError` with code ``closed`` when the gateway closed
    it cleanly, ``idle`` when it went silent; a :class:`ServiceUnavailableError` on 429 or 503)."""
    delay: float
    """Seconds the follower waits before reconnecting (at least the ``Retry-After`` asked for)."""


TicketSource: TypeAlias = str | Callable[[], str | Awaitable[str]]
"""A stream ticket, or a function (sync or async) that gets one; a function is called again when
the gateway refuses an expired ticket."""

Classify: TypeAlias = Callable[[SseMessage], tuple[F | None, bool]]


class Follow(AsyncIterator[F]):
    """A followed SSE stream: an async iterator of frames that reconnects by itself.

    Iterate it (``async for frame in follow``); leave the loop to stop, or use it as an async
    context manager to close the connection at once when the block ends. :attr:`last_event_id`
    is where a later follower would resume.
    """

    def __init__(
        self,
        transport: Transport,
        path: str,
        query: Query,
        classify: Classify[F],
        *,
        last_event_id: str | None,
        ticket: TicketSource | None,
        reconnect: Reconnect | None,
        on_reconnect: Callable[[ReconnectInfo], None] | None,
    ) -> None:
        self._t = transport
        self._path = path
        self._query = dict(query)
        self._classify = classify
        self._last_event_id = last_event_id or None
        self._ticket = ticket
        self._reconnect = reconnect or Reconnect()
        self._on_reconnect = on_reconnect
        self._gen: AsyncGenerator[F, None] = self._follow()

    @property
    def last_event_id(self) -> str | None:
        """The id of the last event received (or the one this follower started from)."""
        return self._last_event_id

    def __aiter__(self) -> Follow[F]:
        return self

    async def __anext__(self) -> F:
        return await self._gen.__anext__()

    async def aclose(self) -> None:
        """Closes the connection; iterating afterwards ends at once."""
        await self._gen.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _get_ticket(self) -> str:
        source = self._ticket
        if source is None or isinstance(source, str):
            return source or ""
        value = source()
        if inspect.isawaitable(value):
            value = await value
        return value

    async def _follow(self) -> AsyncGenerator[F, None]:
        options = self._reconnect
        failures = 0
        ticket: str | None = None
        # A refused ticket is asked for again once: a second refusal in a row, before any stream
        # opened, is raised (a source that keeps handing out bad tickets must not spin).
        ticket_refused = False
        while True:
            progressed = False
            error: GatewayError
            try:
                query = dict(self._query)
                anonymous = False
                if self._ticket is not None:
                    if ticket is None:
                        ticket = await self._get_ticket()
                    query["ticket"] = ticket
                    anonymous = True
                headers = {} if self._last_event_id is None else {"last-event-id": self._last_event_id}
                response = await self._t.open_stream(
                    self._path, query=query, headers=headers, anonymous=anonymous, idle_timeout=options.idle_timeout
                )
                try:
                    ticket_refused = False
                    parser = SseParser()
                    chunks = response.aiter_bytes()
                    while True:
                        try:
                            chunk = await chunks.__anext__()
                        except StopAsyncIteration:
                            break
                        except httpx.ReadTimeout as cause:
                            raise NetworkError(
                                f"GET {self._path}: nothing for {options.idle_timeout:g} s", code="idle"
                            ) from cause
                        except httpx.HTTPError as cause:
                            raise NetworkError(
                                f"GET {self._path}: {cause or type(cause).__name__}", code="network"
                            ) from cause
                        messages = parser.push(chunk)
                        if messages or parser.comments:
                            progressed = True
                        for message in messages:
                            if message.id:
                                self._last_event_id = message.id
                            frame, done = self._classify(message)
                            if frame is not None:
                                yield frame
                            if done:
                                return
                finally:
                    await response.aclose()
                # The gateway closed the stream without an end (a drain or restart): reconnect.
                error = NetworkError(f"GET {self._path}: the stream closed", code="closed")
            except UnauthorizedError:
                if callable(self._ticket) and not ticket_refused:
                    # An expired ticket: get a new one at once.
                    ticket_refused = True
                    ticket = None
                    continue
                raise
            except GatewayError as failed:
                if not failed.retryable:
                    raise
                error = failed
            if progressed:
                failures = 0
            failures += 1
            if options.max_attempts is not None and failures > options.max_attempts:
                raise error
            backoff = min(options.max_delay, options.initial_delay * 2 ** min(failures - 1, 20))
            delay = max(error.retry_after or 0.0, backoff)
            if self._on_reconnect is not None:
                self._on_reconnect(ReconnectInfo(failures, self._last_event_id, error, delay))
            await asyncio.sleep(delay)
