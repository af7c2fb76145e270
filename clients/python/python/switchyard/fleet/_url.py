"""The URLs :func:`switchyard.fleet.backend_from_url` accepts, and the native URL each names."""

from __future__ import annotations

#: The native backends by their URL scheme (without ``switchyard+``), each with an example URL.
SCHEMES: dict[str, str] = {
    "memory": "switchyard+memory://",
    "sqlite": "switchyard+sqlite:///path/to/fleet.db",
    "redis": "switchyard+redis://127.0.0.1:6379/0",
    "rediss": "switchyard+rediss://host:6380/0",
    "redis-cluster": "switchyard+redis-cluster://host1:7000,host2:7001",
    "postgres": "switchyard+postgres://user@host:5432/db?schema=fleet",
    "postgresql": "switchyard+postgresql://user@host:5432/db",
}

PREFIX = "switchyard+"


def native_url(url: str) -> str:
    """The URL for ``switchyard._native.open_fleet_backend``: ``url`` without ``switchyard+``.

    ``url`` may also be given without the ``switchyard+`` (``redis://…``). Raises
    :class:`ValueError` naming the accepted schemes when the scheme is none of them; the rest of
    the URL is checked by the native open (a :class:`switchyard.ConfigError`, also a
    ``ValueError``). The message never repeats the URL, which may hold a password.
    """
    if not isinstance(url, str):
        raise TypeError(f"a switchyard fleet backend URL is a str, not {type(url).__name__}: {_accepted()}")
    text = url.strip()
    inner = text[len(PREFIX) :] if text.lower().startswith(PREFIX) else text
    scheme, colon, rest = inner.partition(":")
    if not colon or scheme.lower() not in SCHEMES:
        shown = scheme.lower() if colon else "(none)"
        raise ValueError(f"switchyard.fleet cannot open a URL with the scheme {shown!r}: {_accepted()}")
    return scheme.lower() + ":" + rest


def _accepted() -> str:
    examples = ", ".join(SCHEMES.values())
    return (
        f"use one of {examples} (fleet-framework's own redis://, memory:// and sqlite:// URLs are served by "
        "fleet itself; pip install 'switchyard-py[fleet]' registers the switchyard+ schemes with "
        "fleet.core.backend.backend_from_url)"
    )
