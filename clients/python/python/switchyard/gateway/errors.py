"""Errors as the gateway reports them, typed by what the caller can do about them.

Every refusal of the gateway is JSON ``{error, message, field?, request_id}`` (plus route-specific
extras such as ``held_by`` or ``limit``). :func:`error_from_response` reads one into the class below
that says what to do; a request that never got an answer is a :class:`NetworkError`.

These classes are the gateway client's own: they share no name and no base with the errors of
the native extension (:mod:`switchyard.errors`), which report what a backend opened in-process
did. The two names that would have collided are spelled :class:`CancelledTaskError` and
:class:`ServiceUnavailableError` here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from switchyard.gateway.types import Json

__all__ = [
    "CancelledTaskError",
    "ConflictError",
    "ForbiddenError",
    "GatewayError",
    "InvalidRequestError",
    "NetworkError",
    "NotFoundError",
    "ReceiptLostError",
    "ServiceUnavailableError",
    "TooLargeError",
    "UnauthorizedError",
    "error_from_response",
]

_RETRYABLE = frozenset({0, 429, 502, 503})


class GatewayError(Exception):
    """Anything the gateway refused or failed, or a request that never got an answer.

    ``str(error)`` is the whole story (``"POST /v1/runs: 409 session_busy: …"``); the attributes
    hold its parts.
    """

    status: int
    """The HTTP status; 0 when no response came (network failure, timeout)."""
    code: str
    """The gateway's stable code (``error``), or ``network``, ``timeout``, ``idle``, ``closed``
    without a response."""
    message: str
    """What went wrong and what to do next, as the gateway wrote it."""
    field: str | None
    """The dotted path of the field at fault, when the gateway names one."""
    request_id: str | None
    """The id the gateway logged the request under (``x-request-id``)."""
    retry_after: float | None
    """Seconds the gateway asks to wait before retrying (``Retry-After``)."""
    body: dict[str, Json] | None
    """The whole error body, with its route-specific extras (``held_by``, ``limit``, …)."""

    def __init__(
        self,
        text: str = "",
        *,
        status: int = 0,
        code: str = "error",
        message: str | None = None,
        field: str | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
        body: dict[str, Json] | None = None,
    ) -> None:
        super().__init__(text)
        self.status = status
        self.code = code
        self.message = text if message is None else message
        self.field = field
        self.request_id = request_id
        self.retry_after = retry_after
        self.body = body

    @property
    def retryable(self) -> bool:
        """Whether the same request may succeed later unchanged (no answer, 429, 502, 503)."""
        return self.status in _RETRYABLE


class NetworkError(GatewayError):
    """No answer came: the connection failed, the request timed out, or a stream went silent."""


class InvalidRequestError(GatewayError):
    """400 or 422: the request is malformed or a field is invalid (:attr:`field` names it). Fix it."""


class UnauthorizedError(GatewayError):
    """401: no token, an unknown one, or an expired stream ticket."""


class ForbiddenError(GatewayError):
    """403: the token lacks the right, or the namespace or queue is outside its scope."""


class NotFoundError(GatewayError):
    """404: no such run, task, stream, schedule or route (:attr:`code` says which)."""


class ConflictError(GatewayError):
    """409: the state forbids it: ``session_busy`` (:attr:`held_by` names the open run),
    ``not_resumable``, ``run_exists``, ``task_exists``, ``timed_out``, …"""

    @property
    def held_by(self) -> str | None:
        """The open run holding the session, on ``session_busy``."""
        held = (self.body or {}).get("held_by")
        return held if isinstance(held, str) else None


class ReceiptLostError(ConflictError):
    """409 ``receipt_not_current``: the reservation lapsed and the task went back to the queue (or
    to another worker). Stop working on it; its end is no longer this worker's to report."""


class CancelledTaskError(ConflictError):
    """409 ``cancelled``: the task was cancelled. Stop; it ends ``cancelled`` and is not retried.

    (The TypeScript client's ``TaskCancelledError``.)
    """


class TooLargeError(GatewayError):
    """413: the body (or a task's result) is over the gateway's limit (``limit`` in :attr:`body`)."""


class ServiceUnavailableError(GatewayError):
    """429 or 503: a limit was reached or a backend is unavailable; retry after :attr:`retry_after`.

    (The TypeScript client's ``UnavailableError``.)
    """


_BY_STATUS: dict[int, type[GatewayError]] = {
    400: InvalidRequestError,
    422: InvalidRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    413: TooLargeError,
    429: ServiceUnavailableError,
    503: ServiceUnavailableError,
}

_DIGITS = re.compile(r"^\d+$")


def error_from_response(status: int, headers: Mapping[str, str], text: str, what: str) -> GatewayError:
    """Reads a non-2XX answer into the class that says what to do about it.

    ``headers`` is looked up with lower-case names (an :class:`httpx.Headers` is case-insensitive);
    ``what`` names the request (``"GET /v1/runs"``) at the start of the error's text.
    """
    body: dict[str, Json] | None = None
    try:
        parsed: object = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), str) and isinstance(parsed.get("message"), str):
        body = parsed
    code = str(body["error"]) if body is not None else f"http_{status}"
    if body is not None:
        message = str(body["message"])
    else:
        message = text.strip()[:500] or f"HTTP {status}"
    retry_header = headers.get("retry-after")
    retry_after = float(retry_header) if retry_header is not None and _DIGITS.match(retry_header.strip()) else None
    request_id = body.get("request_id") if body is not None else None
    if not isinstance(request_id, str):
        request_id = headers.get("x-request-id")
    field = body.get("field") if body is not None else None
    cls = _BY_STATUS.get(status, GatewayError)
    if status == 409 and code == "receipt_not_current":
        cls = ReceiptLostError
    elif status == 409 and code == "cancelled":
        cls = CancelledTaskError
    return cls(
        f"{what}: {status} {code}: {message}",
        status=status,
        code=code,
        message=message,
        field=field if isinstance(field, str) else None,
        request_id=request_id,
        retry_after=retry_after,
        body=body,
    )
