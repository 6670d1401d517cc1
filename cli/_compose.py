"""The composition root: wire engine + sandbox + tools for one CLI invocation."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from codemode.engine import MemorySessionLog, Scope, SessionLog, SqliteSessionLog, ToolRuntime
from codemode.engine.policies import LocalSpillStore, SpillPolicy, TimeoutPolicy
from codemode.sandbox import Limits

if TYPE_CHECKING:
    from codemode.tools import JobManager

__all__ = [
    "LANGUAGES",
    "LANGUAGE_ALIASES",
    "MEMORY_FLOOR_MB",
    "CLI_LIMITS",
    "Invocation",
    "detect_language",
    "open_invocation",
    "state_parent",
]

LANGUAGES = ("python", "typescript")
LANGUAGE_ALIASES = {
    "python": "python",
    "py": "python",
    "typescript": "typescript",
    "ts": "typescript",
}

# The address-space limit below which a guest cannot do useful work. A worker is a fork
# of the pre-warmed server, so it starts with the server's mappings: measured on x86_64
# CPython 3.11, a Python worker maps ~37 MiB (it cannot start under 38 MiB, and a program
# holding 2 MB of strings needs 40 MiB); a TypeScript worker maps ~35 MiB with its QuickJS
# context built (the same program needs 38 MiB). The floor leaves headroom for the guests
# growing (more modules preloaded) rather than tracking the measurement to the MiB.
MEMORY_FLOOR_MB = {"python": 48, "typescript": 48}
_EXTENSIONS = {".py": "python", ".ts": "typescript", ".mts": "typescript", ".js": "typescript"}

# Results larger than this (UTF-8 bytes) are spilled to a file with a preview inline.
_MAX_INLINE_BYTES = 64 * 1024


def make_state_dir(workspace: Path, prefix: str) -> Path:
    """A fresh private state directory outside ``workspace`` (``ValueError`` if none can be)."""
    parent = state_parent(workspace)
    if parent is None:
        raise ValueError(
            f"workspace {str(workspace)!r} contains every state directory candidate; "
            "set TMPDIR to a directory outside it"
        )
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))


BASH_ENV_VARIABLE = "CODEMODE_BASH_ENV"


def bash_env_from(environ: Mapping[str, str]) -> str | list[str]:
    """What ``bash`` sees of the host's environment, from ``CODEMODE_BASH_ENV``: unset or
    ``scrubbed`` (the allow-list, ``codemode.tools.shell.PASS_THROUGH``), ``inherit``
    (everything) or comma-separated names passed on top of the allow-list."""
    raw = environ.get(BASH_ENV_VARIABLE, "").strip()
    if raw in ("", "scrubbed"):
        return "scrubbed"
    if raw == "inherit":
        return "inherit"
    names = [name.strip() for name in raw.split(",") if name.strip()]
    bad = [name for name in names if not name.replace("_", "a").isalnum() or name[0].isdigit()]
    if not names or bad:
        raise ValueError(
            f"{BASH_ENV_VARIABLE} must be scrubbed, inherit or comma-separated variable "
            f"names, got {raw!r}"
        )
    return names


async def install_builtin_tools(
    stack: contextlib.AsyncExitStack,
    runtime: ToolRuntime,
    workspace: Path,
    state_dir: Path,
    *,
    interactive: bool = True,
    skills_dirs: tuple[Path, ...] = (),
    skills_in_description: bool = False,
    bash: str = "one-shot",
    images: bool = False,
    attachments: Any = None,
) -> JobManager:
    """Register the first-party tools bound to ``workspace`` on ``runtime``, with the
    policies they rely on: spilled results and bash output go under ``state_dir``, and
    ``stack`` stops the background jobs when it closes. Install ``TimeoutPolicy`` first
    (the outer wrapper).

    ``interactive``: questions and plan reviews are asked on this terminal (refused with a
    clear error when stdin is not one); ``False`` (a server) registers no provider.
    ``skills_dirs``: where ``skill`` finds ``SKILL.md`` folders, besides the workspace's
    ``.codemode/skills``. ``bash``: ``"one-shot"`` or ``"persistent"`` (one PTY shell for
    the session). ``images``: the model takes images, so ``read_image`` is offered (its
    images kept in ``attachments``, default in memory).
    Terminal sessions and shells die when ``stack`` closes. Returns the job
    manager (background subagents run in it too). The web tools' destinations and search provider come from the
    ``CODEMODE_WEB_*``/``CODEMODE_SEARXNG_URL``/``BRAVE_SEARCH_API_KEY`` variables, what
    bash sees of the environment from ``CODEMODE_BASH_ENV`` (``bash_env_from``).
    """
    import codemode.tools as first_party
    from codemode.tools.lsp import LspManager
    from codemode.tools.skills import SkillCatalog
    from codemode.tools.terminal import TerminalManager
    from codemode.tools.web import WebConfig

    from ._questions import InteractiveQuestionProvider

    # The SDK's facts block: where relative paths resolve, and which tools refuse to
    # change a file the run has not read (tools/fs/_policy.py).
    runtime.sdk_facts.update(workspace=str(workspace), read_before_write=["edit", "write"])
    store = LocalSpillStore(state_dir / "spill")
    SpillPolicy(store, max_inline_bytes=_MAX_INLINE_BYTES).install(runtime)
    jobs = await stack.enter_async_context(first_party.JobManager(output_dir=state_dir / "jobs"))
    fs_policy = first_party.FsObservationPolicy()
    fs_policy.install(runtime)
    skills = SkillCatalog([workspace / ".codemode" / "skills", *skills_dirs])
    # Language servers start on the first lsp call and stop when the stack closes.
    lsp = await stack.enter_async_context(LspManager())
    # Terminal sessions and persistent shells: their process trees die when the stack closes.
    terminals = await stack.enter_async_context(TerminalManager(work_dir=state_dir / "terminals"))
    for definition in first_party.default_tools(
        workspace,
        fs_policy=fs_policy,
        jobs=jobs,
        spill_store=store,
        output_dir=state_dir / "output",
        questions=InteractiveQuestionProvider(stdin=0) if interactive else None,
        skills=skills,
        skills_in_description=skills_in_description,
        web=WebConfig.from_env(os.environ),
        lsp=lsp,
        terminals=terminals,
        bash="persistent" if bash == "persistent" else "one-shot",
        bash_env=bash_env_from(os.environ),
        accepts_images=images,
        attachments=attachments,
    ):
        runtime.register(definition)
    return jobs


def state_parent(workspace: Path) -> Path | None:
    """Where this run's private state directory goes: the first of ``$TMPDIR`` (or the
    system temporary directory), ``/var/tmp``, ``/dev/shm`` and ``~/.cache`` that exists,
    is writable and lies outside ``workspace``; ``None`` when every one is inside it.

    Job output and spilled results must stay out of the file tools' reach, so a workspace
    such as ``/tmp`` moves the state elsewhere instead of failing.
    """
    root = os.path.realpath(workspace)
    for candidate in (tempfile.gettempdir(), "/var/tmp", "/dev/shm", "~/.cache"):
        real = os.path.realpath(os.path.expanduser(candidate))
        inside = root == os.sep or real == root or real.startswith(root + os.sep)
        if not inside and os.path.isdir(real) and os.access(real, os.W_OK | os.X_OK):
            return Path(real)
    return None


def detect_language(path: str | None, explicit: str | None) -> str:
    """The program language: ``--lang`` wins (aliases allowed), else the file extension,
    else Python."""
    if explicit:
        return LANGUAGE_ALIASES[explicit]
    if path and path != "-":
        return _EXTENSIONS.get(Path(path).suffix.lower(), "python")
    return "python"


class Invocation(msgspec.Struct):
    """What one CLI invocation works with: the tool runtime, the calling agent scope and
    its session log, the workspace and the private state directory."""

    runtime: ToolRuntime
    agent: Scope
    log: SessionLog
    workspace: Path
    state_dir: Path


#: The CLI's sandbox limits. Tighter than the library's defaults (60 s compute, 600 s
#: wall, 64 MiB output) because a terminal user waits on the run: tool calls do not count
#: against ``max_compute_ms``, only the program's own CPU time does. One worker: a CLI
#: invocation runs one program.
CLI_LIMITS = Limits(
    max_compute_ms=10_000,
    max_wall_ms=60_000,
    max_memory_bytes=512 * 2**20,
    max_output_bytes=16 * 2**20,
    pool_size=1,
)


def _code_runtime(language: str, limits: Limits, *, start_in_background: bool = False) -> Any:
    import codemode.sandbox as sandbox

    if language == "typescript":
        return sandbox.TypeScriptRuntime(limits=limits, start_in_background=start_in_background)
    return sandbox.PythonRuntime(limits=limits, start_in_background=start_in_background)


@contextlib.asynccontextmanager
async def open_invocation(
    workspace: Path,
    language: str,
    *,
    keep_state: bool = False,
    limits: Limits | None = None,
    sandbox: bool = True,
    session_path: Path | None = None,
    bash: str = "one-shot",
    skills_dirs: tuple[Path, ...] = (),
    images: bool = False,
) -> AsyncIterator[Invocation]:
    """Start the sandbox, register the default tools bound to ``workspace``, yield.

    Spilled results and bash output files go to a private state directory outside the
    workspace, removed on exit unless ``keep_state`` (then its path is kept for the user).
    Leaving the block (normally, on an error or cancelled by a signal) kills background
    bash jobs and stops the sandbox's fork server and workers. ``sandbox=False`` composes
    the same catalog in native mode without starting a sandbox (for listing tools).
    ``session_path`` keeps the run's session events in a SQLite file there (appended to
    when it exists), which ``codemode log`` replays; by default they stay in memory.
    ``images``: offer ``read_image`` (the caller takes images).
    """
    state_dir = make_state_dir(workspace, "codemode-")
    async with contextlib.AsyncExitStack() as stack:
        if not keep_state:
            stack.callback(shutil.rmtree, state_dir, ignore_errors=True)
        if sandbox:
            code_runtime = await stack.enter_async_context(
                _code_runtime(language, limits or CLI_LIMITS)
            )
            # A person at a terminal reads every line a failed program printed (the
            # message carries them after "Captured output:"); a model's host bounds it.
            runtime = ToolRuntime(
                mode="code", code_runtime=code_runtime, max_quoted_output_chars=None
            )
        else:
            runtime = ToolRuntime(mode="native")
        TimeoutPolicy().install(runtime)
        await install_builtin_tools(
            stack, runtime, workspace, state_dir, bash=bash, skills_dirs=skills_dirs, images=images
        )
        log: SessionLog = (
            MemorySessionLog()
            if session_path is None
            else stack.enter_context(SqliteSessionLog(session_path))
        )
        scope = runtime.scope("cli", session=log)
        yield Invocation(
            runtime=runtime, agent=scope, log=log, workspace=workspace, state_dir=state_dir
        )
