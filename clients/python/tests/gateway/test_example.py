"""The example in ``examples/`` runs as written against the embedded default."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from gateway_support import Gateway

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gateway_worker.py"


async def test_examples_gateway_worker_runs_against_a_gateway(embedded: Gateway) -> None:
    spec = importlib.util.spec_from_file_location("gateway_worker_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = await module.main(embedded.url)
    assert out["results"] == [{"pixels": 4096}, {"pixels": 16384}, {"pixels": 65536}]
    assert out["kinds"] == ["run.started", "text.delta", "run.completed"]
