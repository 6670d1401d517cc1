"""The environment header of a report, and which peers this run can measure.

Peers are optional (the ``bench`` extra): each is probed by importing it, and one that
cannot be imported or was disabled (``--no-peer NAME`` or ``CODEMODE_BENCH_NO_PEERS``, a
comma-separated list, which children inherit) is reported as ``"missing: <why>"``.
"""

from __future__ import annotations

import datetime
import importlib
import os
import platform
import sys
from importlib import metadata
from typing import Any

from ._model import FLOOR, MONTY, SMOLAGENTS

__all__ = ["DISABLE_ENV", "PEER_MODULES", "environment", "peer_status", "probe_peers"]

DISABLE_ENV = "CODEMODE_BENCH_NO_PEERS"
#: peer -> (module imported to use it, distribution whose version the header shows)
PEER_MODULES = {
    MONTY: ("pydantic_monty", "pydantic-monty"),
    SMOLAGENTS: ("smolagents.local_python_executor", "smolagents"),
}
_DISTRIBUTIONS = (
    "codemode",
    "pydantic-monty",
    "smolagents",
    "anyio",
    "msgspec",
    "quickjs-ng",
    "RestrictedPython",
    "matplotlib",
    "jsonschema",
)


def disabled_peers() -> set[str]:
    """Peers switched off through ``CODEMODE_BENCH_NO_PEERS``."""
    return {p.strip() for p in os.environ.get(DISABLE_ENV, "").split(",") if p.strip()}


def peer_status() -> dict[str, str]:
    """Peer -> ``"ok"`` or ``"missing: <why>"`` (importing each available one)."""
    off = disabled_peers()
    status: dict[str, str] = {}
    for peer, (module, _dist) in PEER_MODULES.items():
        if peer in off:
            status[peer] = f"missing: disabled ({DISABLE_ENV} / --no-peer)"
            continue
        try:
            importlib.import_module(module)
        except Exception as exc:  # ImportError, or a broken install of an optional peer
            status[peer] = (
                f"missing: {module} not importable ({type(exc).__name__}: {exc}); pip install 'codemode[bench]'"
            )
        else:
            status[peer] = "ok"
    status[FLOOR] = "ok" if FLOOR not in off else f"missing: disabled ({DISABLE_ENV} / --no-peer)"
    return status


async def probe_peers(status: dict[str, str]) -> dict[str, str]:
    """``status`` with every importable peer also made to run ``1`` once: one that imports
    but cannot run here (pydantic-monty without its ``monty`` binary) is missing too."""
    import anyio

    probed = dict(status)
    if probed.get(MONTY) == "ok":
        try:
            import pydantic_monty

            with anyio.fail_after(60):
                async with pydantic_monty.AsyncMonty(min_processes=1) as monty:
                    async with monty.checkout() as session:
                        if await session.feed_run("1") != 1:
                            raise RuntimeError("`1` did not evaluate to 1")
        except Exception as exc:
            probed[MONTY] = f"missing: cannot run here ({type(exc).__name__}: {exc})"
    if probed.get(SMOLAGENTS) == "ok":
        try:
            from smolagents.local_python_executor import LocalPythonExecutor

            executor = LocalPythonExecutor([], timeout_seconds=None)
            executor.send_tools({})
            if executor("1").output != 1:
                raise RuntimeError("`1` did not evaluate to 1")
        except Exception as exc:
            probed[SMOLAGENTS] = f"missing: cannot run here ({type(exc).__name__}: {exc})"
    return probed


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _source_commit() -> str | None:
    """The git commit of a source checkout codemode runs from (``None`` from a wheel)."""
    import subprocess
    from pathlib import Path

    import codemode

    for parent in Path(codemode.__file__).resolve().parents:
        if (parent / ".git").exists():
            try:
                done = subprocess.run(
                    ["git", "-C", str(parent), "describe", "--always", "--dirty", "--abbrev=12"],
                    capture_output=True, text=True, timeout=5, check=False,
                )  # fmt: skip
            except (OSError, subprocess.SubprocessError):
                return None
            return done.stdout.strip() or None
    return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def environment(*, seed: int, runs: int, quick: bool, suites: list[str]) -> dict[str, Any]:
    """What a reader needs to reproduce or discount the numbers."""
    return {
        "date_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "load_average": _load(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "kernel": platform.release(),
        "platform": platform.platform(),
        "packages": {d: _version(d) for d in _DISTRIBUTIONS},
        "codemode_commit": _source_commit(),
        "seed": seed,
        "runs": runs,
        "quick": quick,
        "suites": suites,
    }
