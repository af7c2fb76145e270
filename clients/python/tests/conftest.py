"""Servers for the package's tests: real ones, never mocks.

``cargo test`` runs this suite from ``tests/pytest.rs``, which starts private Redis and
PostgreSQL servers with the workspace's harness and passes them in ``SWITCHYARD_TEST_REDIS_URL``
and ``SWITCHYARD_TEST_POSTGRES_URL`` (and the gateway binary of the same build in
``SWITCHYARD_BIN``). Run by hand (``pytest`` in this directory after ``maturin develop``), the
fixtures start their own ``redis-server`` and ``initdb``/``pg_ctl`` servers on free ports, and
fail with what to install when a program is missing: a test is never skipped.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout} s")


def _program(name: str, how: str, extra_dirs: list[str] | None = None) -> str:
    found = shutil.which(name)
    for pattern in extra_dirs or []:
        for candidate in sorted(glob.glob(os.path.join(pattern, name)), reverse=True):
            found = found or candidate
    if not found:
        pytest.fail(f"`{name}` is not installed: {how}", pytrace=False)
    return found


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A private Redis server (or ``SWITCHYARD_TEST_REDIS_URL``)."""
    if url := os.environ.get("SWITCHYARD_TEST_REDIS_URL"):
        yield url
        return
    server = _program("redis-server", "apt-get install redis-server")
    port = _free_port()
    proc = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(port, "redis-server")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A private PostgreSQL server (or ``SWITCHYARD_TEST_POSTGRES_URL``)."""
    if url := os.environ.get("SWITCHYARD_TEST_POSTGRES_URL"):
        yield url
        return
    how = "apt-get install postgresql (the fixture runs initdb and pg_ctl from /usr/lib/postgresql/*/bin)"
    dirs = ["/usr/lib/postgresql/*/bin"]
    initdb = _program("initdb", how, dirs)
    pg_ctl = _program("pg_ctl", how, dirs)
    data = tempfile.mkdtemp(prefix="switchyard-py-pg-")
    port = _free_port()
    as_user: list[str] = []
    if os.geteuid() == 0:
        # PostgreSQL refuses to run as root: run it as the owner Debian's package creates.
        shutil.chown(data, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    subprocess.run([*as_user, initdb, "-D", data, "-U", "postgres", "-A", "trust"], check=True, capture_output=True)
    options = f"-p {port} -c listen_addresses=127.0.0.1 -c fsync=off -c unix_socket_directories={data}"
    subprocess.run(
        [*as_user, pg_ctl, "-D", data, "-o", options, "-l", os.path.join(data, "log"), "-w", "start"],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgres://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", data, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture(scope="session")
def switchyard_bin() -> str:
    """The gateway binary: ``SWITCHYARD_BIN``, else this checkout's debug build."""
    path = os.environ.get("SWITCHYARD_BIN") or str(ROOT / "target" / "debug" / "switchyard")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no switchyard binary at {path}: run `cargo build -p switchyard-cli` or set SWITCHYARD_BIN", pytrace=False)
    return path


@pytest.fixture
def unique() -> str:
    """A fresh id fragment, for key prefixes, schemas, queue and session names."""
    return uuid.uuid4().hex[:12]
