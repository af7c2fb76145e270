"""The transport every part of the client shares: one base URL, one token, one httpx client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Final
from urllib.parse import quote

import httpx

from switchyard.gateway.errors import GatewayError, NetworkError, error_from_response

Query = Mapping[str, "str | int | float | bool | None"]
"""A query's values; ``None`` leaves the parameter out."""

DEFAULT_TIMEOUT: Final = 30.0
"""Seconds a request may take: the gateway's own request deadline."""


class _NoBody:
    """The absence of a body (``None`` is the JSON ``null``)."""


NO_BODY: Final = _NoBody()


def seg(value: str) -> str:
    """Encodes one path segment (a run id, a queue, a receipt)."""
    return quote(value, safe="")


def dumps(value: object) -> str:
    """JSON as the gateway takes it: UTF-8, no ``NaN`` or infinities (JSON has none)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _query_value(value: str | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class Transport:
    """Builds URLs, sends JSON, and turns refusals into typed errors."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None,
        timeout: float,
        headers: Mapping[str, str] | None,
        transport: httpx.AsyncBaseTransport | None,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        if not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.base_url = base_url.rstrip("/")
        self._token = token
        self.timeout = float(timeout)
        # Timeouts are applied per request (below); the pool is sized for a worker's long polls,
        # extends and acks plus a few followers.
        self.client = httpx.AsyncClient(
            transport=transport,
            headers=dict(headers or {}),
            timeout=httpx.Timeout(self.timeout),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
            follow_redirects=False,
        )

    @property
    def has_token(self) -> bool:
        """Whether requests carry a bearer token."""
        return self._token is not None

    def url(self, path: str) -> str:
        """The absolute URL of ``path`` (already encoded)."""
        return self.base_url + path

    def _headers(self, accept: str, method: str, extra: Mapping[str, str] | None, anonymous: bool) -> dict[str, str]:
        headers = {"accept": accept}
        headers.update(extra or {})
        if self._token is not None and not anonymous:
            headers["authorization"] = f"Bearer {self._token}"
        # The gateway takes writes only as JSON, an empty body included: a browser page cannot send
        # that type cross-site without CORS.
        if method not in ("GET", "HEAD"):
            headers["content-type"] = "application/json"
        return headers

    @staticmethod
    def _params(query: Query | None) -> httpx.QueryParams:
        return httpx.QueryParams([(k, _query_value(v)) for k, v in (query or {}).items() if v is not None])

    async def json(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: object = NO_BODY,
        extra_timeout: float = 0.0,
        headers: Mapping[str, str] | None = None,
    ) -> object:
        """Sends a request and returns its decoded JSON answer (``None`` for an empty one); a
        non-2XX answer raises its typed error, no answer a :class:`NetworkError`."""
        what = f"{method} {path}"
        content = None if isinstance(body, _NoBody) else dumps(body).encode()
        timeout = self.timeout + max(0.0, extra_timeout)
        try:
            async with asyncio.timeout(timeout):
                response = await self.client.request(
                    method,
                    self.url(path),
                    params=self._params(query),
                    content=content,
                    headers=self._headers("application/json", method, headers, False),
                    timeout=httpx.Timeout(timeout),
                )
        except (TimeoutError, httpx.TimeoutException) as cause:
            raise NetworkError(f"{what}: no answer within {timeout:g} s", code="timeout") from cause
        except httpx.HTTPError as cause:
            raise NetworkError(f"{what}: {_describe(cause)}", code="network") from cause
        if not response.is_success:
            raise error_from_response(response.status_code, response.headers, response.text, what)
        if not response.content:
            return None
        try:
            return json.loads(response.content)
        except ValueError as cause:
            raise GatewayError(
                f"{what}: the gateway answered {response.status_code} with a body that is not JSON",
                status=response.status_code,
                code="malformed_response",
                request_id=response.headers.get("x-request-id"),
            ) from cause

    async def open_stream(
        self,
        path: str,
        *,
        query: Query | None,
        headers: Mapping[str, str] | None,
        anonymous: bool,
        idle_timeout: float,
    ) -> httpx.Response:
        """Opens an SSE stream and returns its response once the head arrived (the caller reads
        the body and closes it). The request timeout covers the head; then each read may wait
        ``idle_timeout`` seconds (``httpx.ReadTimeout`` past it). A refusal raises its typed error."""
        what = f"GET {path}"
        request = self.client.build_request(
            "GET",
            self.url(path),
            params=self._params(query),
            headers=self._headers("text/event-stream", "GET", headers, anonymous),
            timeout=httpx.Timeout(self.timeout, read=idle_timeout),
        )
        try:
            async with asyncio.timeout(self.timeout):
                response = await self.client.send(request, stream=True)
        except (TimeoutError, httpx.TimeoutException) as cause:
            raise NetworkError(f"{what}: no answer within {self.timeout:g} s", code="timeout") from cause
        except httpx.HTTPError as cause:
            raise NetworkError(f"{what}: {_describe(cause)}", code="network") from cause
        if response.is_success:
            return response
        try:
            async with asyncio.timeout(self.timeout):
                text = (await response.aread()).decode("utf-8", "replace")
        except (TimeoutError, httpx.HTTPError):
            text = ""
        finally:
            await response.aclose()
        raise error_from_response(response.status_code, response.headers, text, what)

    async def aclose(self) -> None:
        await self.client.aclose()


def _describe(error: BaseException) -> str:
    text = str(error)
    cause = error.__cause__ or error.__context__
    if not text and cause is not None:
        text = str(cause)
    return text or type(error).__name__
