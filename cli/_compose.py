"""The composition root: wire engine + sandbox + tools for one CLI invocation."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec

from engine import MemorySessionLog, Scope, ToolRuntime
from engine.policies import LocalSpillStore, SpillPolicy, TimeoutPolicy

__all__ = ["LANGUAGES", "Session", "detect_language", "open_session"]

LANGUAGES = ("python", "typescript")
_EXTENSIONS = {".py": "python", ".ts": "typescript", ".mts": "typescript", ".js": "typescript"}

# Results larger than this (UTF-8 bytes) are spilled to a file with a preview inline.
_MAX_INLINE_BYTES = 64 * 1024


def detect_language(path: str | None, explicit: str | None) -> str:
    """The program language: ``--lang`` wins, else the file extension, else Python."""
    if explicit:
        return explicit
    if path and path != "-":
        return _EXTENSIONS.get(Path(path).suffix.lower(), "python")
    return "python"


class Session(msgspec.Struct):
    """What one CLI run works with."""

    runtime: ToolRuntime
    scope: Scope
    log: MemorySessionLog
    workspace: Path
    state_dir: Path


def _code_runtime(language: str) -> Any:
    import sandbox

    if language == "typescript":
        return sandbox.TypeScriptRuntime()
    return sandbox.PythonRuntime()


@contextlib.asynccontextmanager
async def open_session(
    workspace: Path, language: str, *, keep_state: bool = False
) -> AsyncIterator[Session]:
    """Start the sandbox, register the default tools bound to ``workspace``, yield.

    Spilled results and bash output files go to a private state directory outside the
    workspace, removed on exit unless ``keep_state`` (then its path is kept for the user).
    """
    import tools as first_party

    state_dir = Path(tempfile.mkdtemp(prefix="codemode-"))
    async with contextlib.AsyncExitStack() as stack:
        if not keep_state:
            stack.callback(shutil.rmtree, state_dir, ignore_errors=True)
        code_runtime = await stack.enter_async_context(_code_runtime(language))
        runtime = ToolRuntime(mode="code", code_runtime=code_runtime)
        TimeoutPolicy().install(runtime)
        store = LocalSpillStore(state_dir / "spill")
        SpillPolicy(store, max_inline_bytes=_MAX_INLINE_BYTES).install(runtime)
        jobs = await stack.enter_async_context(first_party.JobManager())
        fs_policy = first_party.FsObservationPolicy()
        fs_policy.install(runtime)
        for definition in first_party.default_tools(
            workspace,
            fs_policy=fs_policy,
            jobs=jobs,
            spill_store=store,
            output_dir=state_dir / "output",
        ):
            runtime.register(definition)
        log = MemorySessionLog()
        scope = runtime.scope("cli", session=log)
        yield Session(
            runtime=runtime, scope=scope, log=log, workspace=workspace, state_dir=state_dir
        )
