"""Runs: start, append, resume, read, list, and follow a run's live stream."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, TypedDict, cast

from switchyard.gateway._http import Query, Transport, seg
from switchyard.gateway.sse import Follow, Reconnect, ReconnectInfo, SseMessage, TicketSource
from switchyard.gateway.types import (
    AppendedEvents,
    Block,
    Payload,
    Resumed,
    RunEvent,
    RunList,
    RunStatus,
    RunView,
    Started,
    Ticket,
)

__all__ = ["RunEndFrame", "RunEventFrame", "RunFrame", "RunGapFrame", "Runs", "StreamGap"]


class StreamGap(TypedDict):
    """The ``gap`` frame's data: the cursor cannot be replayed; reload the run with :meth:`Runs.get`."""

    code: str
    run_id: str
    requested_event_id: str | None
    earliest_available_event_id: str
    latest_available_event_id: str
    recovery: str


@dataclass(frozen=True, slots=True)
class RunEventFrame:
    """A stored event, published with its kind as the SSE event name."""

    id: str
    """The event's stream id: pass it as ``last_event_id`` to resume after it."""
    event: str
    """The SSE event name (the event's kind)."""
    data: RunEvent
    """The stored event."""
    type: Literal["event"] = field(default="event", init=False)


@dataclass(frozen=True, slots=True)
class RunGapFrame:
    """The stream cannot be continued without loss: read the run (:meth:`Runs.get`) instead. Last frame."""

    gap: StreamGap
    type: Literal["gap"] = field(default="gap", init=False)


@dataclass(frozen=True, slots=True)
class RunEndFrame:
    """The run finished: its last event came before. Last frame.

    ``reason`` is set when the gateway ended the stream for another cause (``token_revoked``:
    do not reconnect with the same credentials).
    """

    reason: str | None = None
    type: Literal["end"] = field(default="end", init=False)


RunFrame: TypeAlias = RunEventFrame | RunGapFrame | RunEndFrame
"""What following a run yields."""


def _address(session: str | None, namespace: str | None) -> dict[str, str | None]:
    return {"session": session, "namespace": namespace}


def _drop_none(values: Mapping[str, object]) -> dict[str, object]:
    return {k: v for k, v in values.items() if v is not None}


def classify_run_message(message: SseMessage) -> tuple[RunFrame | None, bool]:
    """Frames with an id are events; ``end`` and ``gap`` carry none, and end the subscription."""
    if not message.id:
        if message.event == "end":
            reason: str | None = None
            try:
                data = json.loads(message.data) if message.data else None
            except ValueError:
                data = None
            if isinstance(data, dict) and isinstance(data.get("reason"), str):
                reason = data["reason"]
            return RunEndFrame(reason), True
        if message.event == "gap":
            return RunGapFrame(cast(StreamGap, json.loads(message.data))), True
        return None, False
    return RunEventFrame(message.id, message.event, cast(RunEvent, json.loads(message.data))), False


class Runs:
    """A gateway's runs (``client.runs``)."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    async def start(
        self,
        *,
        invocable: str,
        kind_of_invocable: str,
        input: Sequence[Block] = (),
        run_id: str | None = None,
        session_id: str | None = None,
        namespace: str | None = None,
        origin: str | None = None,
        stale_after_secs: int | None = None,
    ) -> Started:
        """Starts a run: claims its session (one open run per session; stale runs are closed) and
        stores ``run.started``.

        ``kind_of_invocable`` is ``agent``, ``workflow`` or ``skill``; ``run_id`` defaults to a
        fresh one. A busy session raises :class:`~switchyard.gateway.ConflictError`
        (``session_busy``, with :attr:`~switchyard.gateway.ConflictError.held_by`); a run id its
        log already has, ``run_exists``.
        """
        body = _drop_none(
            {
                "invocable": invocable,
                "kind_of_invocable": kind_of_invocable,
                "input": list(input),
                "run_id": run_id,
                "session_id": session_id,
                "namespace": namespace,
                "origin": origin,
                "stale_after_secs": stale_after_secs,
            }
        )
        return cast(Started, await self._t.json("POST", "/v1/runs", body=body))

    async def append(
        self,
        run_id: str,
        events: Payload | Sequence[Payload],
        *,
        session: str | None = None,
        namespace: str | None = None,
        origin: str | None = None,
    ) -> AppendedEvents:
        """Appends one payload, or a batch (stored atomically, in order, at most 1,000), to an open
        run; each is published to the run's stream. ``origin`` says who wrote them (default
        ``gateway``)."""
        body: object
        if isinstance(events, Mapping):
            body = dict(events) if origin is None else {"events": [dict(events)], "origin": origin}
        else:
            body = _drop_none({"events": [dict(e) for e in events], "origin": origin})
        return cast(
            AppendedEvents,
            await self._t.json("POST", f"/v1/runs/{seg(run_id)}/events", body=body, query=_address(session, namespace)),
        )

    async def resume(
        self,
        run_id: str,
        *,
        reason: str | None = None,
        value: Sequence[Block] | None = None,
        origin: str | None = None,
        session: str | None = None,
        namespace: str | None = None,
    ) -> Resumed:
        """Resumes a run that waits for a human or is paused, with ``value`` as the answer it waited
        for. Of concurrent resumes exactly one succeeds; the others raise
        :class:`~switchyard.gateway.ConflictError` ``not_resumable``."""
        body = _drop_none({"reason": reason, "value": None if value is None else list(value), "origin": origin})
        return cast(
            Resumed,
            await self._t.json("POST", f"/v1/runs/{seg(run_id)}/resume", body=body, query=_address(session, namespace)),
        )

    async def get(
        self, run_id: str, *, from_seq: int | None = None, session: str | None = None, namespace: str | None = None
    ) -> RunView:
        """A run's status and its events from ``from_seq`` (default 0)."""
        query: Query = {**_address(session, namespace), "from_seq": from_seq}
        return cast(RunView, await self._t.json("GET", f"/v1/runs/{seg(run_id)}", query=query))

    async def list(self, *, namespace: str | None = None, status: RunStatus | None = None) -> RunList:
        """The runs of a namespace (``None``: the runs without one), optionally of one status."""
        return cast(RunList, await self._t.json("GET", "/v1/runs", query={"namespace": namespace, "status": status}))

    async def stream_ticket(self, run_id: str, *, session: str | None = None, namespace: str | None = None) -> Ticket:
        """A stream ticket for one run (gateways with tokens only): hand it to a party that must not
        hold the token (a browser page, another process), which follows the stream with
        ``ticket=``. It opens the stream, reconnects included, for ``expires_in`` seconds."""
        body = _drop_none({"run_id": run_id, "session": session, "namespace": namespace})
        return cast(Ticket, await self._t.json("POST", "/v1/stream-tickets", body=body))

    def follow(
        self,
        run_id: str,
        *,
        session: str | None = None,
        namespace: str | None = None,
        last_event_id: str | None = None,
        ticket: TicketSource | None = None,
        reconnect: Reconnect | None = None,
        on_reconnect: Callable[[ReconnectInfo], None] | None = None,
    ) -> Follow[RunFrame]:
        """Follows a run's live stream: a :class:`RunEventFrame` per event, then a
        :class:`RunEndFrame` when the run finishes, or a :class:`RunGapFrame` when the cursor can no
        longer be replayed (read the run with :meth:`get`). Both end the iteration.

        A dropped connection (a gateway restart, a network blip, a peer silent for three
        heartbeats) is reopened with ``Last-Event-ID``, and the gateway replays exactly what came
        after it; a 429 or 503 is retried after its ``Retry-After``. Pass ``last_event_id`` to
        resume a stream followed before; ``ticket`` (a string, or a function that gets one) to
        follow without the client's token. A refusal that waiting cannot cure is raised: an
        unknown run (404 ``unknown_run``), a finished run whose stream the gateway released after
        its grace (404 ``no_stream``: read the run instead), a token out of scope::

            async for frame in client.runs.follow("run-1", session="s1"):
                if isinstance(frame, RunEventFrame):
                    print(frame.data["kind"])
        """
        return Follow(
            self._t,
            f"/v1/runs/{seg(run_id)}/stream",
            _address(session, namespace),
            classify_run_message,
            last_event_id=last_event_id,
            ticket=ticket,
            reconnect=reconnect,
            on_reconnect=on_reconnect,
        )
