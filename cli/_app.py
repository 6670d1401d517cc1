"""``codemode`` subcommands: run, sdk, tools, log, bench, agent.

Exit codes: ``0`` success, ``1`` the program failed, ``2`` usage error, ``130`` interrupted
(SIGINT, Ctrl-C), ``143`` terminated (SIGTERM), ``129`` hung up (SIGHUP). Each of these
signals cancels the run, kills background bash jobs, stops the sandbox (fork server and
workers) and prints one line on stderr.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import sqlite3
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import anyio
import anyio.abc
import msgspec
import typer
import typer.main

from codemode.engine import AbortController, SqliteSessionLog, ToolExecutionInput
from codemode.engine.json import thaw
from codemode.sandbox import Limits

from ._agent import agent_command
from ._catalog import catalog_entries, render_table
from ._compose import (
    CLI_LIMITS,
    LANGUAGE_ALIASES,
    MEMORY_FLOOR_MB,
    detect_language,
    open_invocation,
    state_parent,
)
from ._console import LazyConsole, escape
from ._log import log_command
from ._serve_mcp import serve_mcp_command

__all__ = ["app", "main"]

# ``rich_markup_mode=None``: plain click help, which shows no ``<bool>`` metavar for
# flags (typer's rich help prints one for every flag, ``--help`` included).
app = typer.Typer(
    name="codemode",
    help="Run model-written programs against tools, in a sandbox, through one guarded pipeline.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

_err = LazyConsole(stderr=True)  # rich loads on the first line it has to draw
_DEFAULTS = CLI_LIMITS
_T = TypeVar("_T")

# SIGHUP too: a closed terminal must not leave background jobs running.
_SIGNAL_WORDS = {
    signal.SIGINT: "interrupted",
    signal.SIGTERM: "terminated",
    signal.SIGHUP: "hung up",
}

LangOption = Annotated[
    str | None,
    typer.Option(
        "--lang",
        "-l",
        help="Program language: python (py) or typescript (ts); default: by extension.",
    ),
]
WorkspaceOption = Annotated[
    Path,
    typer.Option("--workspace", "-w", help="Directory the built-in tools are bound to."),
]


def _usage(message: str) -> typer.Exit:
    # soft_wrap: one line whatever the terminal width, so the message stays greppable.
    # ``escape``: file names are user text, never markup.
    _err.line(("bold red", "error:"), f" {message}", soft_wrap=True, highlight=False)
    return typer.Exit(2)


def _check_lang(lang: str | None) -> None:
    if lang is not None and lang not in LANGUAGE_ALIASES:
        raise _usage(f"unknown language {lang!r} (choose from: {', '.join(LANGUAGE_ALIASES)})")


class _Stopped(Exception):
    """A SIGINT/SIGTERM/SIGHUP arrived: async work was cancelled and torn down, or (for
    SIGTERM/SIGHUP outside the event loop) the handler raised it where the CLI was."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stopped(signum: int) -> NoReturn:
    """Exit the way a shell reports the signal (128 + n), with one line and no traceback."""
    word = _SIGNAL_WORDS.get(signal.Signals(signum), "stopped")
    # A terminal echoes ``^C`` where the cursor is; start the line after it.
    prefix = "\n" if signum == signal.SIGINT and sys.stderr.isatty() else ""
    sys.stderr.write(f"{prefix}codemode: {word}\n")
    sys.stderr.flush()
    raise typer.Exit(128 + signum)


async def _until_signalled(work: Callable[[], Awaitable[_T]]) -> _T:
    # The watcher stays subscribed until the work has finished tearing down, so a second
    # Ctrl-C during teardown is absorbed instead of raising KeyboardInterrupt mid-cleanup.
    received: list[int] = []
    outcome: list[_T] = []
    work_scope = anyio.CancelScope()

    async def watch(*, task_status: anyio.abc.TaskStatus[None]) -> None:
        with anyio.open_signal_receiver(*_SIGNAL_WORDS) as signals:
            task_status.started()
            async for signum in signals:
                if not received:
                    received.append(signum)
                    work_scope.cancel()

    failure: list[Exception] = []
    async with anyio.create_task_group() as tg:
        await tg.start(watch)
        with work_scope:
            try:
                outcome.append(await work())
            except Exception as exc:
                # Re-raised outside the task group, so it is not wrapped in an
                # ExceptionGroup.
                failure.append(exc)
        tg.cancel_scope.cancel()
    if received:
        raise _Stopped(received[0])
    if failure:
        raise failure[0]
    return outcome[0]


def _run_async(work: Callable[[], Awaitable[_T]]) -> _T:
    """``anyio.run`` where SIGINT/SIGTERM/SIGHUP cancel ``work`` (its ``async with`` blocks tear
    the sandbox and background jobs down) and then exit 128 + signal number quietly."""
    try:
        return anyio.run(_until_signalled, work)
    except _Stopped as stop:
        _stopped(stop.signum)
    except KeyboardInterrupt:
        # Ctrl-C before the watcher subscribed (the event loop was still starting).
        _stopped(signal.SIGINT)
    finally:
        # The event loop resets the signals it watched to their defaults on the way out.
        _install_exit_signals()


def _raise_stopped(signum: int, _frame: object) -> None:
    raise _Stopped(signum)


def _install_exit_signals() -> None:
    """Outside the event loop, SIGTERM/SIGHUP raise ``_Stopped`` (like SIGINT raises
    ``KeyboardInterrupt``), so they too end in the one-line exit, not a silent death."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_stopped)


def _version(value: bool) -> None:
    if value:
        # Imported here: importlib.metadata costs ~25 ms, paid by every command otherwise.
        from importlib import metadata

        try:
            version = metadata.version("codemode")
        except metadata.PackageNotFoundError:
            version = "unknown"
        sys.stdout.write(f"codemode {version}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Run model-written programs against tools, in a sandbox, through one guarded pipeline."""
    if os.environ.get("CODEMODE_BASH_ENV"):
        # Checked before any command starts anything (the tools read it when installed).
        from ._compose import bash_env_from

        try:
            bash_env_from(os.environ)
        except ValueError as exc:
            raise _usage(str(exc)) from None


def _check_session_path(session: Path, workspace: Path) -> None:
    if session.is_dir():
        raise _usage(f"session file {str(session)!r} is a directory")
    if not session.parent.is_dir():
        raise _usage(f"session file {str(session)!r}: directory {str(session.parent)!r} not found")
    # The session log is the durable record of what the program did; inside the
    # workspace the program's own file tools could rewrite it.
    resolved, root = session.resolve(), workspace.resolve()
    if resolved == root or root in resolved.parents:
        raise _usage(
            f"session file {str(session)!r} is inside the workspace, where the program's "
            "file tools could change it; put it outside"
        )
    try:
        # Opened (and closed) here so that a file that is not a session log is a usage
        # error before any sandbox starts; the run opens it again to append.
        with SqliteSessionLog(session):
            pass
    except (ValueError, OSError, sqlite3.Error) as exc:
        raise _usage(f"session file {str(session)!r}: {exc}") from None


def _check_workspace(workspace: Path) -> Path:
    if not workspace.is_dir():
        raise _usage(f"workspace {str(workspace)!r} is not a directory")
    if state_parent(workspace) is None:
        # Job output and spilled results must live outside the file tools' reach.
        raise _usage(
            f"workspace {str(workspace)!r} contains every directory codemode could keep its "
            "private state in; set TMPDIR to a writable directory outside the workspace"
        )
    # The built-in web tools read their destinations and search provider from the
    # environment: a bad value is the user's to fix before anything starts.
    from codemode.tools.web import WebConfig

    try:
        WebConfig.from_env(os.environ)
    except ValueError as exc:
        raise _usage(f"web tools configuration: {exc}") from None
    return workspace.resolve()


@app.command(short_help="Run one program in code mode against the built-in tools.")
def run(
    file: Annotated[str, typer.Argument(help="Program file, or - to read stdin.")],
    lang: LangOption = None,
    workspace: WorkspaceOption = Path("."),
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object: result, error and events.")
    ] = False,
    description: Annotated[
        str | None,
        typer.Option("--description", "-d", help="What the program does (shown in logs)."),
    ] = None,
    session: Annotated[
        Path | None,
        typer.Option(
            "--session",
            help="Also keep the run's session events in this SQLite file (see `codemode log`).",
        ),
    ] = None,
    keep_state: Annotated[
        bool,
        typer.Option(
            "--keep-state", help="Keep spilled results and bash output files after the run."
        ),
    ] = False,
    compute_ms: Annotated[
        int, typer.Option("--compute-ms", min=1, help="CPU budget of the program.")
    ] = int(_DEFAULTS.max_compute_ms),
    wall_ms: Annotated[
        int, typer.Option("--wall-ms", min=1, help="Wall-clock ceiling of the program.")
    ] = int(_DEFAULTS.max_wall_ms),
    memory_mb: Annotated[
        int,
        typer.Option(
            "--memory-mb",
            min=1,
            help=f"Address-space limit of the worker (at least {min(MEMORY_FLOOR_MB.values())}).",
        ),
    ] = _DEFAULTS.max_memory_bytes // 2**20,
    output_mb: Annotated[
        int, typer.Option("--output-mb", min=1, help="Cap on logs plus the returned value.")
    ] = _DEFAULTS.max_output_bytes // 2**20,
    bash: Annotated[
        str,
        typer.Option(
            "--bash",
            metavar="one-shot|persistent",
            help="The bash tool: a fresh shell per call, or one persistent PTY shell.",
        ),
    ] = "one-shot",
    skills_dir: Annotated[
        list[Path] | None,
        typer.Option(
            "--skills-dir",
            metavar="DIR",
            help="Where the skill tool finds SKILL.md folders (repeatable; "
            "WORKSPACE/.codemode/skills is always searched).",
        ),
    ] = None,
    images: Annotated[
        bool,
        typer.Option(
            "--images", help="Offer read_image (the caller takes images; see codemode tools)."
        ),
    ] = False,
) -> None:
    """Run one program in code mode against the built-in tools; print what it printed and
    returned."""
    if bash not in ("one-shot", "persistent"):
        raise _usage(f"--bash must be one-shot or persistent, got {bash!r}")
    _check_lang(lang)
    ws = _check_workspace(workspace)
    language = detect_language(file, lang)
    floor = MEMORY_FLOOR_MB[language]
    if memory_mb < floor:
        # Below the floor the worker dies at start-up (or cannot allocate at all), which
        # reads as a sandbox failure; refuse before starting anything.
        raise _usage(
            f"--memory-mb {memory_mb} is below the {floor} MiB a {language} worker needs "
            f"to start; use --memory-mb {floor} or more"
        )
    if file == "-":
        try:
            program = sys.stdin.read()
        except KeyboardInterrupt:
            # Inside a command click would print "Aborted!" and exit 1.
            _stopped(signal.SIGINT)
    else:
        path = Path(file)
        if path.is_dir():
            raise _usage(f"program file {file!r} is a directory")
        if not path.is_file():
            raise _usage(f"program file {file!r} not found")
        try:
            program = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise _usage(f"cannot read {file!r}: {exc}") from None
    summary = description or f"Run {Path(file).name if file != '-' else 'stdin program'}"
    if session is not None:
        # Checked last, after every cheaper usage error: opening it creates the file.
        _check_session_path(session, ws)
    limits = msgspec.structs.replace(
        CLI_LIMITS,
        max_compute_ms=compute_ms,
        max_wall_ms=wall_ms,
        max_memory_bytes=memory_mb * 2**20,
        max_output_bytes=output_mb * 2**20,
    )
    result, events = _run_async(
        lambda: _run_program(
            program,
            language,
            ws,
            summary,
            keep_state,
            limits,
            session,
            bash=bash,
            skills_dirs=tuple(skills_dir or ()),
            keep_spills=as_json,
            images=images,
        )
    )
    if as_json:
        info = result.error.info if result.is_error else None
        failure = _split_failure(result.error.message) if result.is_error else None
        payload: dict[str, Any] = {
            "isError": result.is_error,
            "content": thaw(list(result.content)),
            "value": None if result.is_error else thaw(result.value),
            "error": None
            if failure is None
            else {
                "message": result.error.message,
                "code": info.code if info else None,
                "kind": info.kind if info else None,
                # The program's prints before it failed, on their own (the message
                # carries them too, after "Captured output:").
                "logs": failure[1],
            },
            "events": events,
        }
        sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
    elif result.is_error:
        head, logs = _split_failure(result.error.message)
        # The program's own output stays on stdout, as a script's would; the failure,
        # worded for the person at the terminal, goes to stderr.
        for line in logs:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()
        info = result.error.info
        hint = _with_flag(head, info.kind if info else None)
        _err.line(("bold red", "error:"), f" {hint}", soft_wrap=True, highlight=False)
    else:
        # From the value, not the content: the content is the model's view, cut to a
        # preview above 64 KiB with a pointer to a file this run removes.
        from codemode.engine.code_mode import render_run_code_value

        value = thaw(result.value)
        for line in value.get("logs", []):
            sys.stdout.write(f"{line}\n")
        if "result" in value:
            sys.stdout.write(render_run_code_value(value["result"]) + "\n")
    raise typer.Exit(1 if result.is_error else 0)


_CAPTURED = "\nCaptured output:\n"

# The flag that raises each limit of ``code run failed (<kind>): <message>``.
_LIMIT_FLAGS = (
    ("timeout", "compute budget", "--compute-ms"),
    ("timeout", "wall-clock", "--wall-ms"),
    ("memory", "", "--memory-mb"),
    ("output-limit", "", "--output-mb"),
)


def _split_failure(message: str) -> tuple[str, list[str]]:
    """A failed run's message without its captured output, and that output's lines.

    The engine appends the program's prints after ``Captured output:``; the first marker
    is taken as the engine's. A program whose own error message holds that line shifts
    the split for itself alone: both halves are its own text either way."""
    head, marker, captured = message.partition(_CAPTURED)
    return head, (captured.split("\n") if marker else [])


def _with_flag(head: str, kind: str | None) -> str:
    """``head`` with the flag that raises the limit it hit, inside its parentheses:
    ``compute budget exhausted (10000ms busy; raise with --compute-ms)``."""
    first, newline, rest = head.partition("\n")
    for limit_kind, phrase, flag in _LIMIT_FLAGS:
        if kind == limit_kind and phrase in first:
            if first.endswith(")"):
                first = f"{first[:-1]}; raise with {flag})"
            else:
                first = f"{first} (raise with {flag})"
            break
    return first + newline + rest


async def _run_program(
    program: str,
    language: str,
    workspace: Path,
    summary: str,
    keep_state: bool,
    limits: Limits,
    session: Path | None = None,
    *,
    bash: str = "one-shot",
    skills_dirs: tuple[Path, ...] = (),
    keep_spills: bool = False,
    images: bool = False,
) -> tuple[Any, list[dict[str, Any]]]:
    """Run ``program``; ``keep_spills``: results cut to a preview (over 64 KiB) keep the
    file their preview names, and stderr says where (``--json``: its content and events
    are the model's view, which points at those files)."""
    state_dirs: list[Path] = []
    try:
        return await _run_in_invocation(
            program,
            language,
            workspace,
            summary,
            keep_state or keep_spills,
            limits,
            session,
            bash=bash,
            skills_dirs=skills_dirs,
            announce_state=keep_state,
            state_dirs=state_dirs,
            images=images,
        )
    finally:
        if not keep_state and keep_spills:
            _keep_only_spills(state_dirs)


def _keep_only_spills(state_dirs: list[Path]) -> None:
    """After a ``--json`` run: keep the spilled files (named on stderr), remove the rest."""
    for state_dir in state_dirs:
        spill = state_dir / "spill"
        if spill.is_dir() and any(spill.iterdir()):
            for child in state_dir.iterdir():
                if child != spill:
                    if child.is_dir() and not child.is_symlink():
                        shutil.rmtree(child, ignore_errors=True)
                    else:
                        child.unlink(missing_ok=True)
            _err.print(
                f"codemode: results over 64 KiB were cut to a preview in the JSON; their "
                f"full text is kept in {escape(str(spill))} (remove it when done)",
                soft_wrap=True,
                highlight=False,
            )
        else:
            shutil.rmtree(state_dir, ignore_errors=True)


async def _run_in_invocation(
    program: str,
    language: str,
    workspace: Path,
    summary: str,
    keep_state: bool,
    limits: Limits,
    session: Path | None = None,
    *,
    bash: str = "one-shot",
    skills_dirs: tuple[Path, ...] = (),
    announce_state: bool = True,
    state_dirs: list[Path] | None = None,
    images: bool = False,
) -> tuple[Any, list[dict[str, Any]]]:
    async with open_invocation(
        workspace,
        language,
        images=images,
        keep_state=keep_state,
        limits=limits,
        session_path=session,
        bash=bash,
        skills_dirs=skills_dirs,
    ) as invocation:
        if state_dirs is not None:
            state_dirs.append(invocation.state_dir)
        if announce_state:
            _err.print(f"state directory: {invocation.state_dir}")
        # A session file may hold earlier runs; --json reports this run's events only.
        earlier = invocation.log.events
        before = len(earlier)
        # Each run's call id is new to the file, so its sub-calls (``cli-N:code:k``) never
        # pair with an earlier run's in ``codemode log``.
        runs = {
            e.get("rootCallId") for e in earlier if str(e.get("rootCallId", "")).startswith("cli-")
        }
        result = await invocation.runtime.execute(
            ToolExecutionInput(
                call_id=f"cli-{len(runs) + 1}",
                name="run_code",
                arguments={"code": program, "description": summary},
                signal=AbortController().signal,
                agent=invocation.agent,
            )
        )
        return result, [thaw(e) for e in invocation.log.events[before:]]


@app.command(short_help="Print the SDK section a model sees.")
def sdk(lang: LangOption = None, workspace: WorkspaceOption = Path(".")) -> None:
    """Print the SDK section a model sees for the built-in tools."""
    _check_lang(lang)
    ws = _check_workspace(workspace)
    language = detect_language(None, lang)

    async def render() -> str:
        async with open_invocation(ws, language) as invocation:
            sections = invocation.runtime.system_prompt_sections(invocation.agent)
            return sections["tools:code-only"] + "\n\n" + sections["tools:sdk"]

    sys.stdout.write(_run_async(render) + "\n")


@app.command("tools", short_help="List the built-in tools and when they run in parallel.")
def list_tools(
    workspace: WorkspaceOption = Path("."),
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print a JSON array of {name, description, parameters, outputSchema, "
            "parallelSafe[, parallelSafeWhen], offered} for hosts.",
        ),
    ] = False,
) -> None:
    """List the built-in tool catalog (with the agent-bound tools of ``codemode agent`` and
    ``read_image``, offered with ``--images``), where each is offered and when it may run
    in parallel."""
    ws = _check_workspace(workspace)

    async def collect() -> list[dict[str, Any]]:
        # read_image too: it is offered when the model takes images (--images).
        async with open_invocation(ws, "python", sandbox=False, images=True) as invocation:
            # The agent-bound rows too (goals, schedules, session queries): `codemode agent`
            # serves them; elsewhere no agent drives the scope and they say so when called.
            from codemode.agent import SessionStore, WorkflowRuntime, agent_tools

            offered = {"read_image": "images"}
            with tempfile.TemporaryDirectory(prefix="codemode-tools-") as scratch:
                # Only to build the session-query and workflow tools for the listing (the
                # runtime is never started: nothing runs).
                listing_only = WorkflowRuntime()
                for tool in agent_tools(SessionStore(scratch), workflow_runtime=listing_only):
                    invocation.runtime.register(tool)
                    offered[tool.name] = "agent"
                return catalog_entries(invocation.runtime, invocation.agent, offered)

    entries = _run_async(collect)
    if as_json:
        sys.stdout.write(json.dumps(entries, ensure_ascii=False, indent=2) + "\n")
    else:
        width = shutil.get_terminal_size((100, 24)).columns
        sys.stdout.write(render_table(entries, width) + "\n")


app.command("log", short_help="Print a session file's tool calls as cards.")(log_command)
app.command("agent", short_help="Run a model agent over the built-in tools.")(agent_command)
app.command("serve-mcp", short_help="Serve code mode over MCP in front of MCP servers.")(
    serve_mcp_command
)


@app.command(short_help="Measure codemode against its peers, suite by suite.")
def bench(
    suite: Annotated[
        list[str] | None,
        typer.Option(
            "--suite",
            "-s",
            metavar="NAME",
            help="A suite to run (repeatable; default: all): startup, roundtrip, fanout, "
            "mixed, pipeline, payload, compute, host-load, tools.",
        ),
    ] = None,
    runs: Annotated[
        int | None,
        typer.Option(
            "--runs",
            min=1,
            metavar="N",
            help="Repetitions of each measured case (default 5; 2 with --quick).",
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option("--seed", metavar="S", help="Seed of the fan-out latency draws.")
    ] = 0,
    quick: Annotated[
        bool,
        typer.Option(
            "--quick", help="Fewer points and samples: all suites in about a minute on 2 cores."
        ),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print one JSON object on stdout (tables and progress go to stderr)."
        ),
    ] = False,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            metavar="FILE.png",
            help="Write the fan-out figure to this PNG (needs matplotlib).",
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help=(
                "Exit 1 when a measured target is missed (one below a floor measured in "
                "the same run is reported so, not failed)."
            ),
        ),
    ] = False,
    no_peer: Annotated[
        list[str] | None,
        typer.Option(
            "--no-peer",
            metavar="NAME",
            help="Leave a peer out (reported as missing): pydantic-monty, smolagents, asyncio-floor.",
        ),
    ] = None,
    hog: Annotated[
        int,
        typer.Option(
            "--hog",
            min=0,
            max=64,
            metavar="N",
            help="Run host-load beside N busy processes (one per core keeps every core busy).",
        ),
    ] = 0,
) -> None:
    """Run the benchmark suites (installed with codemode) and print their numbers.

    Each suite reports median, p95, p99, throughput, the ratio to the ideal and to the
    peers measured in the same run (pydantic-monty, smolagents' local executor, an
    in-process asyncio floor; install them with: pip install 'codemode[bench]').
    """
    from codemode.bench import (
        BenchError,
        BenchOptions,
        check_exit_code,
        console_for,
        plot_available,
        render_report,
        report_json,
        run_bench,
        write_plot,
    )

    options = BenchOptions(
        suites=tuple(suite or ()),
        runs=runs,
        quick=quick,
        seed=seed,
        no_peers=tuple(no_peer or ()),
        hog=hog,
    )
    if plot is not None:
        why = plot_available()
        if why is not None:
            raise _usage(why)
        if not plot.parent.is_dir():
            raise _usage(f"--plot: directory {str(plot.parent)!r} does not exist")
    # Progress is for the person watching: always stderr. The tables are the output
    # (stdout), except with --json, where stdout carries exactly the JSON object.
    progress = console_for(stderr=True)
    console = console_for(stderr=as_json)
    try:
        report = run_bench(options, console=progress)
    except BenchError as exc:
        raise _usage(str(exc)) from None
    render_report(report, console)
    if plot is not None:
        write_plot(report, plot)
        progress.print(f"plot written to {escape(str(plot))}", highlight=False)
    if as_json:
        sys.stdout.write(report_json(report) + "\n")
    sys.stdout.flush()
    if check and check_exit_code(report):
        raise typer.Exit(1)


def _app_for(args: list[str]) -> typer.Typer:
    """The application to run for ``args``: when the first one names a command, the same
    application holding that command alone, else the whole one.

    Typer builds every registered command's click parameters before parsing (evaluating
    each option's annotation: ~25 ms for the seven commands, measured), and a command line
    runs one command. The root callback (``--version``, the ``CODEMODE_BASH_ENV`` check)
    and the group's settings stay, so usage lines, help and errors read the same."""
    if args:
        chosen = [
            info
            for info in app.registered_commands
            if info.callback is not None
            and (info.name or typer.main.get_command_name(info.callback.__name__)) == args[0]
        ]
        if len(chosen) == 1:
            alone = copy.copy(app)
            alone.registered_commands = chosen
            return alone
    return app


def main() -> None:
    """Console-script entry point."""
    _install_exit_signals()
    try:
        _app_for(sys.argv[1:])()
    except KeyboardInterrupt:
        # Ctrl-C outside a run (argument parsing, imports): the same quiet exit.
        _quiet_exit(signal.SIGINT)
    except _Stopped as stop:
        _quiet_exit(stop.signum)


def _quiet_exit(signum: int) -> NoReturn:
    try:
        _stopped(signum)
    except typer.Exit as exit_:
        sys.exit(exit_.exit_code)
