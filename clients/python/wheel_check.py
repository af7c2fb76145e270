"""Checks an installed switchyard-py wheel as a user meets it (run by `cargo xtask wheel`).

    python wheel_check.py EXAMPLES_DIR

Run with the interpreter of a venv the wheel was just installed into (with the ``agentdeck`` and
``fleet`` extras), from a directory outside the source tree and without ``PYTHONPATH``, so every
import below is of the installed files. ``SWITCHYARD_EXPECTED_VERSION`` is the crate's version.
Exits non-zero with the failed check's message.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

SCHEMES = {
    "switchyard+memory",
    "switchyard+sqlite",
    "switchyard+redis",
    "switchyard+rediss",
    "switchyard+redis-cluster",
    "switchyard+postgres",
    "switchyard+postgresql",
}


def check(ok: bool, what: str) -> None:
    if not ok:
        sys.exit(f"wheel check failed: {what}")
    print(f"ok: {what}")


def main(examples: Path) -> None:
    site = Path(sysconfig.get_paths()["purelib"]).resolve()

    import switchyard
    from switchyard import _native

    package = Path(switchyard.__file__).resolve().parent
    check(package.parent == site, f"switchyard is imported from the venv ({package})")
    native = Path(_native.__file__).resolve()
    check(
        native.parent == package and native.name.endswith(".abi3.so"),
        f"the extension is the stable-ABI module of the wheel ({native.name})",
    )
    for typing_file in ("py.typed", "_native.pyi"):
        check((package / typing_file).is_file(), f"{typing_file} is installed")

    expected = os.environ["SWITCHYARD_EXPECTED_VERSION"]
    check(switchyard.__version__ == expected, f"switchyard.__version__ is {expected}")
    dist = importlib.metadata.distribution("switchyard-py")
    check(dist.version == expected, f"the distribution switchyard-py is {expected}")
    extras = set(dist.metadata.get_all("Provides-Extra") or [])
    check({"agentdeck", "fleet"} <= extras, f"the metadata declares the extras {sorted(extras)}")

    points = {
        ep.name: ep.value for ep in importlib.metadata.entry_points(group="fleet.backends")
    }
    check(SCHEMES <= points.keys(), f"fleet.backends names {sorted(SCHEMES)}")
    check(
        all(points[s] == "switchyard.fleet:backend_from_url" for s in SCHEMES),
        "every scheme loads switchyard.fleet:backend_from_url",
    )

    # The seeds' doors, as their own code opens them.
    from agentdeck.core.ports.store import EventStorePort
    from fleet.core.backend import Backend, backend_from_url

    import switchyard.agentdeck as drop_ins

    for name in ("RedisEventStore", "SqliteEventStore", "PostgresEventStore"):
        check(
            issubclass(getattr(drop_ins, name), EventStorePort),
            f"switchyard.agentdeck.{name} is an agentdeck EventStorePort",
        )
    backend = backend_from_url("switchyard+memory://")
    check(
        isinstance(backend, Backend) and type(backend).__module__.startswith("switchyard."),
        "fleet's backend_from_url opens switchyard+memory:// through the entry point",
    )

    # The examples, as a user runs them after `pip install`.
    for example, expect in (
        ("quickstart.py", "appended seqs [1, 2]"),
        ("fleet_backend.py", ""),
    ):
        done = subprocess.run(
            [sys.executable, str(examples / example)],
            capture_output=True,
            text=True,
            timeout=180,
        )
        check(
            done.returncode == 0 and expect in done.stdout,
            f"examples/{example} runs on the installed wheel"
            + ("" if done.returncode == 0 else f":\n{done.stdout}{done.stderr}"),
        )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
