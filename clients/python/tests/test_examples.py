"""The examples run as written (the gateway example is run by tests/gateway/test_example.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("name", ["quickstart.py", "fleet_backend.py"])
def test_the_example_runs(name: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=tmp_path,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    if name == "quickstart.py":
        assert "held by run-1" in done.stdout
        assert "appended seqs [1, 2]" in done.stdout
        assert "good: {'sent_to': 'ada@example.com'}" in done.stdout
        assert "bad: dead" in done.stdout and "not an address" in done.stdout
