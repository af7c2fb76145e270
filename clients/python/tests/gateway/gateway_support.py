"""Helpers of the gateway client's tests: ``switchyard serve`` processes, tokens, waiting."""

from __future__ import annotations

import asyncio
import inspect
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

_PREFIX = "switchyard listening on "


def clean_env() -> dict[str, str]:
    """The environment of a gateway: none of the developer's SWITCHYARD_* settings leak in."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("SWITCHYARD_") and k not in ("REDIS_URL", "POSTGRES_URL")
    }
    env["SWITCHYARD_LOG"] = "warn"
    return env


@dataclass
class Gateway:
    """One ``switchyard serve`` process."""

    url: str
    process: subprocess.Popen[bytes]
    args: list[str]
    dir: Path
    listen: str = field(default="")
    reader: threading.Thread | None = None

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then waits for the exit (the gateway drains its streams first)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.reader is not None:
            self.reader.join(5)

    def terminate(self) -> None:
        """SIGTERM without waiting: the gateway stops listening at once and drains in the
        background (its streams end without an ``end`` frame, so followers reconnect)."""
        self.process.terminate()

    def freeze(self) -> None:
        """SIGSTOP: the process keeps its connections but sends nothing (a silent peer)."""
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.process.send_signal(signal.SIGCONT)


def start_gateway(binary: str, directory: Path, args: Sequence[str], listen: str = "127.0.0.1:0") -> Gateway:
    """``switchyard serve --listen <listen> <args>`` in ``directory``; returns once it printed its
    address."""
    command = [binary, "serve", "--listen", listen, *args]
    process = subprocess.Popen(
        command, cwd=directory, env=clean_env(), stdout=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    lines: queue.Queue[bytes] = queue.Queue()

    def drain() -> None:
        # Reads every line, so that a chatty gateway never blocks on a full pipe.
        assert process.stdout is not None
        with process.stdout:
            for line in process.stdout:
                lines.put(line)
        lines.put(b"")

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        first = lines.get(timeout=30).decode().strip()
    except queue.Empty:
        process.kill()
        process.wait()
        raise RuntimeError(f"{command} did not start within 30 s") from None
    if not first.startswith(_PREFIX):
        process.kill()
        code = process.wait()
        reader.join(5)
        raise RuntimeError(f"{command} exited with {code} before listening (first line {first!r})")
    url = first[len(_PREFIX) :]
    return Gateway(
        url=url, process=process, args=list(args), dir=directory, listen=url.split("://", 1)[1], reader=reader
    )


def new_token(binary: str, directory: Path, name: str, args: Sequence[str]) -> tuple[str, str]:
    """A token made by ``switchyard token new``: its secret and its entry for the token file."""
    out = subprocess.run(
        [binary, "token", "new", name, *args],
        cwd=directory,
        env=clean_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = out.split("\n")
    secret = lines[1].removeprefix("# ")
    entry = "\n".join(line for line in lines if not line.startswith("#"))
    return secret, entry


def embedded_args(directory: Path, *extra: str) -> list[str]:
    """The embedded default: one SQLite file in ``directory``, the memory stream bridge."""
    return ["--sqlite", str(directory / "switchyard.db"), "--no-scheduler", *extra]


def redis_args(redis_url: str, prefix: str, *extra: str) -> list[str]:
    """Every port on Redis, under key prefixes of this gateway's own."""
    return [
        "--redis",
        redis_url,
        "--event-store-prefix",
        f"t{prefix}:events",
        "--stream-bridge-prefix",
        f"t{prefix}:stream",
        "--fleet-prefix",
        f"t{prefix}:fleet",
        "--no-scheduler",
        *extra,
    ]


async def eventually(check: Callable[[], bool | Awaitable[bool]], what: str, timeout: float = 10.0) -> None:
    """Polls ``check`` until it holds, or fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout} s")
        await asyncio.sleep(0.02)


GatewayFactory = Callable[..., Gateway]
"""``start(*args, listen=…)``: the ``start`` fixture."""


@dataclass
class Sent:
    """One request a :class:`RecordingTransport` sent."""

    at: float
    method: str
    path: str
    body: bytes


class RecordingTransport(httpx.AsyncHTTPTransport):
    """A real transport that also notes each request it sends (to count acks and extends)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[Sent] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(Sent(time.monotonic(), request.method, request.url.path, request.content))
        return await super().handle_async_request(request)

    def paths(self, suffix: str) -> list[Sent]:
        return [s for s in self.sent if s.path.endswith(suffix)]
