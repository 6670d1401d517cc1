"""A TEST-ONLY guest that runs a program as plain, unrestricted Python in the worker.

It exists to prove that the kernel layers (rlimits, seccomp, namespaces, credentials)
hold even if the RestrictedPython guards were bypassed entirely. ``PythonRuntime`` never
registers it; only a pool built explicitly with ``guests={"raw": "codemode.sandbox.worker._raw_guest"}``
(the sandbox tests) can run it. The program may set ``result`` (sent as the value) and
can reach the bridge as ``bridge`` to send hostile frames.
"""

from __future__ import annotations

import asyncio
import traceback
from typing import Any

import msgspec

from ._bridge import WorkerBridge
from ._frames import DoneFrame, ErrorSpec, RunFrame

__all__ = ["prefault", "prepare_template", "serve", "warm"]


def warm() -> None:
    """Nothing to warm: the raw guest imports nothing beyond the worker's own modules."""


def prepare_template(
    loop: asyncio.AbstractEventLoop, options: dict[str, Any] | None = None
) -> None:
    """Nothing to prepare for the workers."""


def prefault(loop: asyncio.AbstractEventLoop) -> None:
    """Nothing to pre-fault."""


def serve(run: RunFrame, bridge: WorkerBridge, loop: asyncio.AbstractEventLoop) -> None:
    """Execute ``run.program`` with full builtins; report ``result`` or the traceback."""
    namespace: dict[str, Any] = {"bridge": bridge, "loop": loop, "__name__": "__raw__"}
    try:
        exec(compile(run.program, "<raw>", "exec"), namespace)
    except BaseException:
        error = ErrorSpec(kind="exception", message=traceback.format_exc())
        bridge.send(DoneFrame(error=error))
        return
    value = namespace.get("result", msgspec.UNSET)
    bridge.send(DoneFrame(value=value))
