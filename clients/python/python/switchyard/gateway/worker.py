"""A worker over the gateway's HTTP worker API.

It reserves as many tasks as it has free slots (long polls), runs the handler on each in its own
asyncio task while a timer extends the reservation (every third of its visibility), and ends each
one by what the handler did: a return value is the ack's result (acks that finish together go in
one ``ack_many`` request), a raised :class:`FailTask` dead-letters the task, a :class:`RetryTask`
nacks it with its delay, and any other exception nacks it (retried per the task's retry policy,
dead-lettered at its last attempt).

The handler's asyncio task is cancelled when the task is cancelled (the gateway answers an extend
or progress with 409 ``cancelled``), when its reservation is lost, at the task's deadline (its
``timeout_seconds``), or when the worker stops past its grace; :attr:`TaskContext.stop_reason`
says which. What it returns then is not stored. A cancelled task is given back and the gateway
ends it ``cancelled`` (never retried); a lost one belongs to another delivery; a timed-out or
stopped one is given back with a nack. A handler that swallows the cancellation keeps running,
but its slot is freed after ``cancel_grace`` seconds.

Delivery is at least once, as with every queue that leases work: a worker that dies holding a
task (or never gets its ack through) loses the reservation, and the task runs again.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Final, Generic, Self, TypeAlias, TypeVar, cast

from switchyard.gateway._http import dumps
from switchyard.gateway.errors import (
    CancelledTaskError,
    ConflictError,
    GatewayError,
    ReceiptLostError,
    TooLargeError,
)
from switchyard.gateway.types import AckItem, AckOutcome, JsonInput, LastError, Nacked, ReservedTask

if TYPE_CHECKING:
    from switchyard.gateway.queues import Queue

__all__ = [
    "FailTask",
    "Handler",
    "RetryTask",
    "TaskContext",
    "TaskTimeoutError",
    "Worker",
    "WorkerStats",
    "WorkerStoppedError",
]

P = TypeVar("P")
T = TypeVar("T")

MAX_RESERVE: Final = 100
MAX_ACKS: Final = 1000

logger = logging.getLogger("switchyard.gateway.worker")


class FailTask(Exception):
    """Raised by a handler: the task cannot succeed; dead-letter it now, without the remaining
    attempts. Its message becomes the task's last error."""


class RetryTask(Exception):
    """Raised by a handler: retry the task after ``delay`` seconds (``None``: per its retry policy).
    This still counts as an attempt: the last one dead-letters the task."""

    def __init__(self, message: str = "retry requested", *, delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay


class TaskTimeoutError(Exception):
    """The stop reason of a handler whose task's deadline (``timeout_seconds``) passed."""


class WorkerStoppedError(Exception):
    """The stop reason of a handler still running when the worker stopped past its grace."""


@dataclass(slots=True)
class WorkerStats:
    """What a worker did so far."""

    reserved: int = 0
    """Deliveries taken."""
    completed: int = 0
    """Acked."""
    retried: int = 0
    """Nacked for a retry."""
    dead_lettered: int = 0
    """Dead-lettered: :class:`FailTask`, a failure at the last attempt, or a malformed body."""
    cancelled: int = 0
    """Stopped because the task was cancelled."""
    lost: int = 0
    """Reservations lost to a lapse (the task went to another delivery)."""
    timed_out: int = 0
    """Attempts past the task's deadline."""


class TaskContext(Generic[P]):
    """What a handler sees of one delivery."""

    __slots__ = (
        "_handler_task",
        "_reason",
        "_stopped",
        "_worker",
        "attempt",
        "deadline",
        "id",
        "last_error",
        "max_attempts",
        "payload",
        "priority",
        "receipt",
        "reservation",
    )

    id: str | None
    """The task id (``None`` when the body is not a task envelope)."""
    receipt: str
    """This delivery's receipt."""
    payload: P
    """The task's payload."""
    attempt: int
    """This delivery's attempt (1 on the first)."""
    max_attempts: int
    """The attempts the task is given; a failure at the last one dead-letters it."""
    priority: str
    """``high``, ``normal`` or ``low``."""
    last_error: LastError | None
    """Why the previous attempt failed, if it did."""
    deadline: float | None
    """Unix seconds by which this attempt must end (the task's ``timeout_seconds``), if any."""
    reservation: ReservedTask
    """The reservation as the gateway sent it."""

    def __init__(self, reservation: ReservedTask, worker: Worker[P]) -> None:
        self.reservation = reservation
        self.id = reservation.get("id")
        self.receipt = reservation["receipt"]
        self.payload = cast(P, reservation["payload"])
        self.attempt = reservation["attempt"]
        self.max_attempts = reservation["max_attempts"]
        self.priority = reservation["priority"]
        self.last_error = reservation.get("last_error")
        self.deadline = reservation.get("deadline")
        self._worker = worker
        self._reason: BaseException | None = None
        self._stopped = asyncio.Event()
        self._handler_task: asyncio.Task[JsonInput] | None = None

    def __repr__(self) -> str:
        return f"TaskContext(id={self.id!r}, attempt={self.attempt}, queue={self._worker.queue.name!r})"

    @property
    def stop_reason(self) -> BaseException | None:
        """Why the handler was told to stop (its asyncio task was cancelled): a
        :class:`~switchyard.gateway.CancelledTaskError`, a
        :class:`~switchyard.gateway.ReceiptLostError`, a :class:`TaskTimeoutError` or a
        :class:`WorkerStoppedError`; ``None`` while it may go on."""
        return self._reason

    @property
    def stopping(self) -> bool:
        """Whether the handler was told to stop."""
        return self._reason is not None

    async def wait_stopped(self) -> BaseException:
        """Waits until the handler is told to stop, and returns why (for work that runs outside the
        handler's own task and must end with it)."""
        await self._stopped.wait()
        assert self._reason is not None
        return self._reason

    async def progress(self, value: JsonInput) -> None:
        """Reports progress (any JSON up to 64 KiB), kept with the task and shown in flight. Raises
        :class:`~switchyard.gateway.CancelledTaskError` once the task is cancelled (and the
        handler is cancelled too)."""
        try:
            await self._worker.queue.progress(self.receipt, value)
        except GatewayError as error:
            self._worker._stop_on(self, error)
            raise

    def _stop(self, reason: BaseException) -> None:
        if self._reason is not None:
            return
        self._reason = reason
        self._stopped.set()
        if self._handler_task is not None:
            self._handler_task.cancel(f"{type(reason).__name__}: {reason}")


Handler: TypeAlias = Callable[[TaskContext[P]], Awaitable[JsonInput]]
"""An async handler: what it returns (any JSON, or ``None``) is stored as the task's result."""


@dataclass(slots=True)
class _PendingAck:
    receipt: str
    result: JsonInput
    future: asyncio.Future[AckOutcome]


def _bounded(name: str, value: float, low: float, high: float, *, integer: bool = False) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not low <= value <= high or (integer and value != int(value)):
        kind = "an integer" if integer else "a number"
        raise ValueError(f"{name} must be {kind} in {low:g}..={high:g}, got {value!r}")
    return value


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class Worker(Generic[P]):
    """Runs a handler on a queue's tasks (make one with :meth:`Queue.worker
    <switchyard.gateway.Queue.worker>`).

    ``concurrency`` handlers run at once (1 to 1,000). Each reservation lasts ``visibility``
    seconds and is extended every ``extend_every`` seconds (default a third of it) while its
    handler runs. A reserve long-polls up to ``wait`` seconds (0 to 30) while nothing is due:
    also the most :meth:`stop` waits for it. Acks that come within ``ack_window`` seconds of each
    other go together in one request (``batch_acks``, default on when ``concurrency`` > 1). A
    handler gets ``cancel_grace`` seconds to settle after its cancellation before its slot is
    freed. ``on_error`` is told of every error the worker handled and went on from (a handler's
    exception, a lost reservation, a reserve that failed and is retried); without it they are
    logged on the ``switchyard.gateway.worker`` logger.

    Use it as an async context manager (started on entry, stopped on exit), or call
    :meth:`run` (until stopped), or :meth:`start` and :meth:`stop`::

        async with queue.worker(handle, concurrency=8):
            await shutdown.wait()
    """

    def __init__(
        self,
        queue: Queue,
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
    ) -> None:
        self.queue = queue
        self.stats = WorkerStats()
        """What this worker did so far."""
        self._handler = handler
        self._concurrency = int(_bounded("concurrency", concurrency, 1, 1000, integer=True))
        self._visibility = _bounded("visibility", visibility, 0.1, 43_200)
        every = self._visibility / 3 if extend_every is None else extend_every
        self._extend_every = _bounded("extend_every", every, 0.05, self._visibility)
        self._wait = _bounded("wait", wait, 0, 30)
        self._batch_acks = self._concurrency > 1 if batch_acks is None else batch_acks
        self._ack_window = _bounded("ack_window", ack_window, 0, 1)
        self._cancel_grace = _bounded("cancel_grace", cancel_grace, 0, 3600)
        self._on_error = on_error
        self._running: dict[asyncio.Task[None], TaskContext[P]] = {}
        self._slot_freed = asyncio.Event()
        self._stop_requested = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._stop_task: asyncio.Task[None] | None = None
        self._acks: list[_PendingAck] = []
        self._ack_timer: asyncio.TimerHandle | None = None
        self._flushes: set[asyncio.Task[None]] = set()
        self._abandoned: set[asyncio.Task[JsonInput]] = set()

    def __repr__(self) -> str:
        return f"Worker(queue={self.queue.name!r}, concurrency={self._concurrency}, running={self.running})"

    @property
    def running(self) -> int:
        """Handlers running now."""
        return len(self._running)

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stop_requested.is_set()

    # --- life -----------------------------------------------------------------------------------

    def start(self) -> asyncio.Task[None]:
        """Starts reserving and running tasks (once; later calls return the same task). The task
        returned ends when the worker stops taking work, and raises when the gateway refuses the
        worker for good (a bad token, a queue out of the token's scope); running handlers go on
        until :meth:`stop`."""
        if self._loop_task is None:
            if self._stop_task is not None:
                raise RuntimeError("the worker was stopped: make a new one")
            self._loop_task = asyncio.get_running_loop().create_task(
                self._reserve_loop(), name=f"switchyard worker of {self.queue.name!r}"
            )
        return self._loop_task

    async def run(self) -> None:
        """Starts the worker and returns once it stopped: after :meth:`stop` (called from another
        task or a signal handler) has finished, or, stopped likewise, with the error that refused
        it for good. Cancelling ``run`` stops the worker as :meth:`stop` does."""
        loop_task = self.start()
        try:
            await asyncio.wait({loop_task})
        finally:
            await self.stop()
        if not loop_task.cancelled() and (error := loop_task.exception()) is not None:
            raise error

    async def stop(self, grace: float = 30.0) -> None:
        """Stops: no new reservations (a long poll in flight is awaited and what it brings is run),
        then waits up to ``grace`` seconds for the running handlers; the ones still running are
        cancelled (:class:`WorkerStoppedError`) and their tasks given back with a nack. Returns
        when nothing runs and every ack was answered. Later calls wait for the same stop."""
        if self._stop_task is None:
            _bounded("grace", grace, 0, math.inf)
            self._stop_task = asyncio.get_running_loop().create_task(self._stop(grace))
        await asyncio.shield(self._stop_task)

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
        loop_task = self._loop_task
        if exc is None and loop_task is not None and not loop_task.cancelled() and loop_task.exception() is not None:
            raise cast(BaseException, loop_task.exception())

    async def _stop(self, grace: float) -> None:
        self._stop_requested.set()
        self._slot_freed.set()
        if self._loop_task is not None:
            await asyncio.wait({self._loop_task})
            if not self._loop_task.cancelled():
                self._loop_task.exception()  # retrieved: `start`'s caller or `run` raises it
        if self._running:
            await asyncio.wait(set(self._running), timeout=grace)
            for context in list(self._running.values()):
                context._stop(WorkerStoppedError("the worker is stopping"))
            if self._running:
                await asyncio.wait(set(self._running))
        self._flush_acks()
        while self._flushes:
            await asyncio.wait(set(self._flushes))

    # --- reserving ------------------------------------------------------------------------------

    async def _reserve_loop(self) -> None:
        backoff = 0.0
        while not self.stopping:
            while len(self._running) >= self._concurrency and not self.stopping:
                self._slot_freed.clear()
                await self._slot_freed.wait()
            if self.stopping:
                break
            free = min(MAX_RESERVE, self._concurrency - len(self._running))
            try:
                tasks = await self.queue.reserve(
                    max_tasks=free, visibility_seconds=self._visibility, wait_seconds=self._wait
                )
                backoff = 0.0
            except GatewayError as error:
                if not error.retryable:
                    raise
                self._report(error, None)
                backoff = min(5.0, max(0.1, backoff * 2, error.retry_after or 0.0))
                try:
                    await asyncio.wait_for(self._stop_requested.wait(), backoff)
                except TimeoutError:
                    pass
                continue
            for task in tasks:
                self._spawn(task)

    def _spawn(self, reservation: ReservedTask) -> None:
        self.stats.reserved += 1
        context = TaskContext(reservation, self)
        runner = asyncio.get_running_loop().create_task(self._run(context))
        self._running[runner] = context
        runner.add_done_callback(self._finished)

    def _finished(self, runner: asyncio.Task[None]) -> None:
        context = self._running.pop(runner, None)
        self._slot_freed.set()
        if not runner.cancelled() and (error := runner.exception()) is not None:
            self._report(error, context.reservation if context is not None else None)

    # --- one delivery ---------------------------------------------------------------------------

    async def _run(self, context: TaskContext[P]) -> None:
        task = context.reservation
        receipt = context.receipt
        malformed = task.get("malformed")
        if malformed:
            if await self._end(task, lambda: self.queue.fail(receipt, f"not a task envelope: {malformed}")):
                self.stats.dead_lettered += 1
            return
        loop = asyncio.get_running_loop()
        handler_task: asyncio.Task[JsonInput] = loop.create_task(self._call(context))
        context._handler_task = handler_task
        extender = loop.create_task(self._extend_loop(context))
        deadline_timer: asyncio.TimerHandle | None = None
        deadline = context.deadline
        if isinstance(deadline, int | float):
            deadline_timer = loop.call_later(
                max(0.0, deadline - time.time()),
                context._stop,
                TaskTimeoutError(f"the task's deadline passed (attempt {context.attempt})"),
            )
        try:
            await self._settle_or_abandon(context, handler_task)
        except asyncio.CancelledError:
            handler_task.cancel()
            raise
        finally:
            extender.cancel()
            if deadline_timer is not None:
                deadline_timer.cancel()

        if handler_task.done() and not handler_task.cancelled():
            handler_task.exception()  # retrieved: what a stopped handler raised is not its task's end
        reason = context.stop_reason
        if reason is not None:
            if isinstance(reason, CancelledTaskError):
                # The backend ends a cancel-requested delivery when its holder gives it back (the
                # nack is answered 409 `cancelled`); otherwise it would wait for the lapse.
                try:
                    await self.queue.nack(receipt, reason="cancelled")
                except GatewayError:
                    pass
                self.stats.cancelled += 1
                return
            if isinstance(reason, ReceiptLostError):
                self.stats.lost += 1
                self._report(reason, task)
                return
            # A timeout or a stop: give the task back now rather than when its reservation lapses.
            if isinstance(reason, TaskTimeoutError):
                self.stats.timed_out += 1
            await self._nack(task, _describe(reason), None)
            return

        error: BaseException | None
        if handler_task.cancelled():
            error = asyncio.CancelledError("the handler was cancelled")
        else:
            error = handler_task.exception()
        if error is None:
            value = handler_task.result()
            try:
                # Checked here, so that one handler's value that JSON cannot carry (a set, a NaN)
                # fails its own task instead of the batch of acks it would travel in.
                dumps(value)
            except (TypeError, ValueError) as unencodable:
                error = unencodable
            else:
                await self._complete(task, value)
                return
        self._report(error, task)
        if isinstance(error, FailTask):
            reason_text = str(error) or "FailTask"
            if await self._end(task, lambda: self.queue.fail(receipt, reason_text[:4096])):
                self.stats.dead_lettered += 1
            return
        delay = error.delay if isinstance(error, RetryTask) else None
        await self._nack(task, _describe(error), delay)

    async def _call(self, context: TaskContext[P]) -> JsonInput:
        return await self._handler(context)

    async def _settle_or_abandon(self, context: TaskContext[P], handler_task: asyncio.Task[JsonInput]) -> None:
        """Waits for the handler; once it is told to stop, waits at most ``cancel_grace`` more,
        then gives up on it (it keeps running, unreferenced by the worker's slots)."""
        stopped = asyncio.get_running_loop().create_task(context._stopped.wait())
        try:
            await asyncio.wait({handler_task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
        if handler_task.done():
            return
        await asyncio.wait({handler_task}, timeout=self._cancel_grace)
        if not handler_task.done():
            # Abandoned: it ignored its cancellation. Whatever it ends with is not reported, and
            # stopping does not wait for it.
            self._abandoned.add(handler_task)
            handler_task.add_done_callback(self._abandoned.discard)
            handler_task.add_done_callback(_retrieve)

    async def _extend_loop(self, context: TaskContext[P]) -> None:
        while not context.stopping:
            await asyncio.sleep(self._extend_every)
            try:
                await self.queue.extend(context.receipt, self._visibility)
            except GatewayError as error:
                if not self._stop_on(context, error) and not context.stopping:
                    self._report(error, context.reservation)

    def _stop_on(self, context: TaskContext[P], error: GatewayError) -> bool:
        """Stops the handler on an answer that says its delivery is over; whether it did."""
        if isinstance(error, CancelledTaskError | ReceiptLostError):
            context._stop(error)
            return True
        if _is_timed_out(error):
            context._stop(TaskTimeoutError(error.message))
            return True
        return False

    # --- ends -----------------------------------------------------------------------------------

    async def _complete(self, task: ReservedTask, result: JsonInput) -> None:
        receipt = task["receipt"]
        try:
            if self._batch_acks:
                outcome = await self._ack_batched(receipt, result)
            else:
                outcome = await self._ack_single(receipt, result)
        except GatewayError as error:
            # No answer, even after resends: the ack may or may not have landed.
            self._report(error, task)
            return
        if outcome["ok"]:
            self.stats.completed += 1
            return
        code = outcome.get("error") or "ack_failed"
        message = outcome.get("message") or code
        if outcome.get("status") == 413:
            self._report(TooLargeError(f"ack: 413 {code}: {message}", status=413, code=code, message=message), task)
            if await self._end(task, lambda: self.queue.fail(receipt, message[:4096])):
                self.stats.dead_lettered += 1
            return
        if code == "cancelled":
            self.stats.cancelled += 1
        elif code == "receipt_not_current":
            self.stats.lost += 1
        else:
            status = outcome.get("status") or 0
            self._report(
                GatewayError(f"ack: {status} {code}: {message}", status=status, code=code, message=message), task
            )

    async def _nack(self, task: ReservedTask, reason: str, delay: float | None) -> None:
        answers: list[Nacked] = []

        async def send() -> None:
            answers.append(await self.queue.nack(task["receipt"], reason=reason[:4096], delay_seconds=delay))

        if not await self._end(task, send):
            return
        if answers and answers[-1]["dead_lettered"]:
            self.stats.dead_lettered += 1
        else:
            self.stats.retried += 1

    async def _end(self, task: ReservedTask, send: Callable[[], Awaitable[None]]) -> bool:
        """Sends an end (fail, nack), resending while no answer comes. Whether it was taken: not
        when refused (cancelled, lost, timed out) or never answered."""
        try:
            await _resend(send)
            return True
        except GatewayError as error:
            if isinstance(error, CancelledTaskError):
                self.stats.cancelled += 1
            elif isinstance(error, ReceiptLostError):
                self.stats.lost += 1
            elif _is_timed_out(error):
                self.stats.timed_out += 1
            else:
                self._report(error, task)
            return False

    async def _ack_single(self, receipt: str, result: JsonInput) -> AckOutcome:
        """One ack, resent while no answer comes; a refusal is an outcome, as in a batch."""
        try:
            await _resend(lambda: self.queue.ack(receipt, result))
        except GatewayError as error:
            if error.status == 0:
                raise
            return {
                "receipt": receipt,
                "ok": False,
                "status": error.status,
                "error": error.code,
                "message": error.message,
            }
        return {"receipt": receipt, "ok": True}

    async def _ack_batched(self, receipt: str, result: JsonInput) -> AckOutcome:
        """An ack that waits up to ``ack_window`` for others and goes with them in one ``ack_many``."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[AckOutcome] = loop.create_future()
        self._acks.append(_PendingAck(receipt, result, future))
        if len(self._acks) >= min(MAX_ACKS, self._concurrency):
            self._flush_acks()
        elif self._ack_timer is None:
            self._ack_timer = loop.call_later(self._ack_window, self._flush_acks)
        return await future

    def _flush_acks(self) -> None:
        if self._ack_timer is not None:
            self._ack_timer.cancel()
            self._ack_timer = None
        while self._acks:
            batch = self._acks[:MAX_ACKS]
            del self._acks[:MAX_ACKS]
            flush = asyncio.get_running_loop().create_task(self._send_acks(batch))
            self._flushes.add(flush)
            flush.add_done_callback(self._flushed)

    async def _send_acks(self, batch: list[_PendingAck]) -> None:
        items: list[AckItem] = [
            {"receipt": a.receipt} if a.result is None else {"receipt": a.receipt, "result": a.result} for a in batch
        ]
        try:
            try:
                answer = (await _resend(lambda: self.queue.ack_many(items)))["results"]
            except TooLargeError:
                # The results together are over the body limit: each on its own (a single result
                # over the limit is then refused on its own, and its task failed).
                await asyncio.gather(*(self._ack_alone(a) for a in batch))
                return
            except GatewayError as error:
                for a in batch:
                    if not a.future.done():
                        a.future.set_exception(error)
                return
            # A 503 outcome is a backend that did not answer: that ack may or may not have landed,
            # and is sent again on its own.
            again: list[_PendingAck] = []
            for i, a in enumerate(batch):
                if i >= len(answer):
                    if not a.future.done():
                        a.future.set_exception(GatewayError("ack_many: the gateway answered fewer outcomes than acks"))
                elif answer[i].get("status") == 503:
                    again.append(a)
                else:
                    _settle(a.future, answer[i])
            if again:
                await asyncio.gather(*(self._ack_alone(a) for a in again))
        finally:
            # Cancelled, or an error no ack could expect: the waiting acks must not wait forever.
            for a in batch:
                if not a.future.done():
                    a.future.cancel()

    async def _ack_alone(self, pending: _PendingAck) -> None:
        try:
            outcome = await self._ack_single(pending.receipt, pending.result)
        except GatewayError as error:
            if not pending.future.done():
                pending.future.set_exception(error)
            return
        _settle(pending.future, outcome)

    # --- helpers --------------------------------------------------------------------------------

    def _flushed(self, flush: asyncio.Task[None]) -> None:
        self._flushes.discard(flush)
        if not flush.cancelled() and (error := flush.exception()) is not None:
            self._report(error, None)

    def _report(self, error: BaseException, task: ReservedTask | None) -> None:
        if self._on_error is None:
            what = (
                f"task {task.get('id')!r} of queue {self.queue.name!r}"
                if task is not None
                else f"queue {self.queue.name!r}"
            )
            logger.warning("switchyard worker: %s: %s", what, _describe(error), exc_info=error)
            return
        try:
            self._on_error(error, task)
        except Exception:
            logger.exception("switchyard worker: on_error raised")


def _retrieve(task: asyncio.Task[JsonInput]) -> None:
    if not task.cancelled():
        task.exception()


def _settle(future: asyncio.Future[AckOutcome], outcome: AckOutcome) -> None:
    if not future.done():
        future.set_result(outcome)


def _is_timed_out(error: BaseException) -> bool:
    return isinstance(error, ConflictError) and error.code == "timed_out"


async def _resend(send: Callable[[], Awaitable[T]]) -> T:
    """Sends a request that ends deliveries, again (up to four times in all, backing off) while no
    answer comes or the gateway is unavailable: resending is safe, since a receipt ends one
    delivery only. Raises the last error."""
    attempt = 1
    while True:
        try:
            return await send()
        except GatewayError as error:
            if not error.retryable or attempt >= 4:
                raise
            await asyncio.sleep(max(0.1 * 2**attempt, error.retry_after or 0.0))
            attempt += 1
