"""``codemode agent [PROMPT]``: a model agent over the built-in tools, in the terminal.

With ``PROMPT``: one task, then exit (``0`` the turn ended normally, ``1`` it failed: the
model could not be asked or the step limit was hit, ``130`` Ctrl-C stopped it); before it
exits, the task waits for every running descendant (continuable children, background
subagent jobs), saying on stderr what it waits for. Without: an
interactive session reading one prompt per line (from the terminal or piped stdin) until
end of input (``0``); Ctrl-C during a turn stops that turn and returns to the prompt,
Ctrl-C at the prompt exits (``130``). ``SIGTERM``/``SIGHUP`` stop everything (``143``/``129``).

Output: streamed text on stdout, the tool calls as presentation cards (as ``codemode log``
draws them) and a spinner on stderr; ``--json`` prints one JSON object per line on stdout
instead: ``session`` (id, path), ``turn-start`` (with its ``origin``: ``user``, ``goal``,
``schedule``), ``text``, ``tool-call``, ``tool-result``, ``context``, ``goal`` (the goal's
value after every change), ``subagent`` (a child's turns and tool calls), ``workflow`` (a
workflow's progress: phases, log lines, agents started and done), ``turn-end`` (with the
turn's and the session's usage).

After a turn ends normally the session may continue on its own: goal rounds while a goal
set with ``create_goal`` is active (``--max-goal-rounds``), and reminders set with
``schedule_create`` when they come due (in an interactive session also while it waits for
the next prompt).

Every message and tool event goes to a session file (``--session FILE``, else a new file
under the private state parent, named on stderr); ``--resume FILE`` continues one. The
model server is any OpenAI-compatible Chat Completions endpoint (``--base-url``,
``--model``, falling back to ``CODEMODE_BASE_URL``/``CODEMODE_MODEL``); the API key is read
from the environment variable ``--api-key-env`` names and never printed.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import math
import os
import shutil
import signal
import sqlite3
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import anyio.abc
import typer

from codemode.agent import (
    Agent,
    AgentEvent,
    ModelClient,
    ModelConfig,
    ModelError,
    RetryPolicy,
    SessionStore,
    SubagentConfig,
    TurnOrigin,
    TurnOutcome,
    WorkflowRuntime,
    agent_tools,
    enable_services,
    new_session_info,
)
from codemode.engine import AbortController, SqliteSessionLog, ToolRuntime
from codemode.engine.policies import TimeoutPolicy

from ._compose import (
    CLI_LIMITS,
    LANGUAGE_ALIASES,
    _code_runtime,
    install_builtin_tools,
    make_state_dir,
    state_parent,
)
from ._console import LazyConsole, escape
from ._log import collect_calls, panels
from ._questions import visible

if TYPE_CHECKING:
    from rich.status import Status

__all__ = ["agent_command"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
MODES = ("native", "code", "both")
_SIGNALS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated", signal.SIGHUP: "hung up"}
# rich loads when something is drawn (a card, the spinner) or its markup is needed: the
# plain lines of a run that is not on a terminal are written without it (``line``).
_err = LazyConsole(stderr=True, highlight=False)
_MAX_PROMPT = 1024 * 1024


def _usage(message: str) -> typer.Exit:
    _err.line(("bold red", "error:"), f" {message}", soft_wrap=True)
    return typer.Exit(2)


# --- output -------------------------------------------------------------------------


class _JsonView:
    """One JSON object per line on stdout."""

    def __init__(self) -> None:
        self.spinning = False

    def write(self, event: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(event, ensure_ascii=False) + "\n")
        sys.stdout.flush()

    def on_event(self, event: AgentEvent) -> None:
        if event["type"] != "step-events":
            self.write(event)

    def note(self, message: str) -> None:
        self.write({"type": "note", "message": message})

    def progress(self, message: str) -> None:
        # stdout carries only the events: progress for the person watching goes to stderr.
        sys.stderr.write(f"codemode: {message}\n")
        sys.stderr.flush()

    def prompt(self) -> None:
        pass


def _workflow_line(event: AgentEvent) -> str:
    """One progress line of a ``workflow`` event (phases, agents running and done)."""
    head = f"workflow {event.get('name')}"
    counts = (
        f"{event.get('running')} running · {event.get('done')} done · "
        f"{event.get('failed')} failed · {event.get('started')} started"
    )
    kind = event.get("event")
    if kind == "start":
        return f"{head}: started — {event.get('description', '')}"
    if kind == "phase":
        detail = f" — {event['detail']}" if event.get("detail") else ""
        return f"{head}: phase {event.get('title')}{detail}"
    if kind == "log":
        return f"{head}: {event.get('message')}"
    if kind == "agent-start":
        return f"{head}: agent {event.get('label')} started ({counts})"
    if kind == "agent-end":
        state = "done" if event.get("ok") else "failed"
        return f"{head}: agent {event.get('label')} {state} ({counts})"
    return f"{head}: {event.get('outcome', kind)} ({counts})"


class _RichView:
    """Streamed text on stdout; cards, the spinner and notes on stderr."""

    def __init__(self) -> None:
        self._status: Status | None = None
        self._fancy = _err.is_terminal
        self._mid_line = False

    def _spin(self, label: str) -> None:
        self._stop()
        if self._fancy:
            self._status = _err.status(label, spinner="dots")
            self._status.start()

    def _stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _end_line(self) -> None:
        if self._mid_line:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self._mid_line = False

    def on_event(self, event: AgentEvent) -> None:
        kind = event["type"]
        if kind == "turn-start":
            self._spin("thinking…")
        elif kind == "text":
            self._stop()
            # Model text is shown, never acted upon: no escape sequences reach the terminal.
            delta = visible(str(event["delta"]))
            sys.stdout.write(delta)
            sys.stdout.flush()
            self._mid_line = not delta.endswith("\n")
        elif kind == "tool-call":
            self._end_line()
            self._spin(f"running {visible(str(event['name']))}…")
        elif kind == "step-events":
            self._stop()
            for panel in panels(collect_calls(event["events"])):
                _err.print(panel)
            self._spin("thinking…")
        elif kind == "workflow":
            self._stop()
            _err.line(("magenta", visible(_workflow_line(event))), soft_wrap=True)
            if event["event"] != "end":
                self._spin(f"running workflow {visible(str(event['name']))}…")
        elif kind == "subagent":
            inner = event["event"]
            label = {
                "turn-start": "started a turn",
                "tool-call": f"calls {inner.get('name')}",
                "turn-end": f"turn ended: {inner.get('reason')}",
            }.get(inner["type"], inner["type"])
            if inner["type"] == "workflow":
                label = _workflow_line(inner)
            self._stop()
            _err.print(f"[dim]subagent {escape(str(event['agentId']))}: {escape(label)}[/]")
        elif kind == "goal":
            self._stop()
            goal = event.get("goal") or {}
            line = (
                f"goal {goal.get('id')} · {goal.get('phase')} · round "
                f"{goal.get('roundsStarted')} of {goal.get('maxGoalRounds')} · "
                f"{event.get('activation')}"
            )
            _err.line(("cyan", visible(line)))
        elif kind == "context":
            self._stop()
            _err.line(("dim", f"context: {visible(str(event['content']))}"))
        elif kind == "turn-end":
            self._stop()
            self._end_line()
            usage = event["usage"]
            summary = (
                f"{event['reason']} · {_count_of(event['steps'], 'step')} · "
                f"{_count_of(usage['totalTokens'], 'token')}"
                f" (session {event['sessionUsage']['totalTokens']})"
            )
            style = {"done": "dim", "concluded": "dim", "error": "bold red"}.get(
                event["reason"], "yellow"
            )
            _err.line((style, f"[{summary}]"))
            if event.get("note"):
                _err.line((style, str(event["note"])), soft_wrap=True)

    def note(self, message: str) -> None:
        self._stop()
        self._end_line()
        _err.line(("dim", message), soft_wrap=True)

    def progress(self, message: str) -> None:
        # The same line as with --json, so it reads (and greps) the same either way.
        self.note(f"codemode: {message}")
        self._spin("waiting…")

    def prompt(self) -> None:
        self._stop()
        sys.stdout.write("› ")
        sys.stdout.flush()


# --- input --------------------------------------------------------------------------


class _Lines:
    """Lines from a file descriptor, awaited (so a cancelled read leaves no thread behind)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = b""
        self._eof = False

    async def readline(self) -> str | None:
        while b"\n" not in self._buffer and not self._eof:
            await anyio.wait_readable(self._fd)
            chunk = os.read(self._fd, 65536)
            if not chunk:
                self._eof = True
            self._buffer += chunk
            if len(self._buffer) > _MAX_PROMPT and b"\n" not in self._buffer:
                raise ValueError("a prompt line longer than 1 MiB")
        if not self._buffer:
            return None
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", errors="replace").rstrip("\r")


# --- the session --------------------------------------------------------------------


class _Options:
    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)

    prompt: str | None
    workspace: Path
    mode: str
    language: str
    config: ModelConfig
    api_key: str
    key_source: str
    max_steps: int
    session: Path
    resume: bool
    as_json: bool
    max_goal_rounds: int
    folder: Path
    subagents: str
    fresh: bool
    images: bool


class _Control:
    """What a signal does now: stop the running turn, or end the session."""

    def __init__(self, main: anyio.CancelScope) -> None:
        self.main = main
        self.turn: AbortController | None = None
        self.exit_signal: int | None = None

    def handle(self, signum: int) -> None:
        if signum == signal.SIGINT and self.turn is not None and not self.turn.signal.aborted:
            self.turn.abort("interrupted by the user (Ctrl-C)")
            return
        # Ctrl-C at the prompt or a second one while the turn stops; SIGTERM; SIGHUP.
        if self.exit_signal is None:
            self.exit_signal = signum
        if self.turn is not None:
            self.turn.abort(f"stopped ({_SIGNALS.get(signal.Signals(signum), 'signal')})")
        self.main.cancel()


async def _turn(
    agent: Agent, control: _Control, prompt: str | None, origin: TurnOrigin | None = None
) -> TurnOutcome:
    """Run ``prompt``'s turn and whatever continues it (goal rounds, due reminders); the
    outcome that decides is the last one (the first that did not end normally)."""
    control.turn = AbortController()
    try:
        outcomes = await agent.run(prompt, signal=control.turn.signal, origin=origin)
        if control.turn.signal.aborted and outcomes[-1].ok:
            import msgspec

            # Ctrl-C while the task waited for its background subagents: it was stopped.
            return msgspec.structs.replace(outcomes[-1], reason="interrupted")
        return outcomes[-1]
    finally:
        control.turn = None


async def _session(opts: _Options, control: _Control) -> int:
    view: _JsonView | _RichView = _JsonView() if opts.as_json else _RichView()
    async with contextlib.AsyncExitStack() as stack:
        state_dir = make_state_dir(opts.workspace, "codemode-agent-")
        stack.callback(shutil.rmtree, state_dir, ignore_errors=True)
        code_runtime = None
        if opts.mode != "native":
            # Started behind the session: the fork server comes up while the model is
            # asked (its first run_code waits for it), not before.
            code_runtime = await stack.enter_async_context(
                _code_runtime(opts.language, CLI_LIMITS, start_in_background=True)
            )
        runtime = ToolRuntime(mode=opts.mode, code_runtime=code_runtime)
        TimeoutPolicy().install(runtime)
        # --images: the model takes images; what read_image reads reaches it as image parts.
        attachments = None
        if opts.images:
            from codemode.tools import MemoryAttachmentStore

            attachments = MemoryAttachmentStore()
        jobs = await install_builtin_tools(
            stack,
            runtime,
            opts.workspace,
            state_dir,
            interactive=_stdin_is_terminal(),
            images=opts.images,
            attachments=attachments,
        )
        store = SessionStore(opts.folder)
        config = SubagentConfig(
            background_mode="continuable" if opts.subagents == "continuable" else "one-shot"
        )
        # Workflow scripts get a QuickJS runtime of their own: the run_code runtime's wall
        # clock (a minute) is far too short for a script that waits on many children.
        # (started on the first workflow call, so other sessions boot no sandbox for it).
        workflow_runtime = await stack.enter_async_context(WorkflowRuntime())
        for tool in agent_tools(store, subagents=config, workflow_runtime=workflow_runtime):
            runtime.register(tool)
        # A new session that no turn got a model answer in (the server could not be
        # reached, nothing was asked) leaves no file behind: registered before the log
        # is entered, so it runs after the log is closed.
        made: list[Agent] = []
        if opts.fresh:
            stack.callback(_drop_unanswered, opts, store, made, view)
        log = stack.enter_context(SqliteSessionLog(opts.session))
        client = await stack.enter_async_context(
            ModelClient(opts.config, api_key=opts.api_key, key_source=opts.key_source)
        )
        agent = Agent(
            runtime,
            runtime.scope("agent", session=log),
            client,
            max_steps=opts.max_steps,
            on_event=view.on_event,
            session=new_session_info(workspace=str(opts.workspace)),
            attachments=attachments,
        )
        made.append(agent)
        restored = agent.resume() if opts.resume else 0
        subagents = enable_services(
            agent,
            max_goal_rounds=opts.max_goal_rounds,
            session_dir=opts.folder,
            jobs=jobs,
            # A one-shot task waits for the subagents it started; a session hears of them
            # between prompts.
            wait_for_children=opts.prompt is not None,
            store=store,
        )
        await stack.enter_async_context(subagents)
        subagents.children.on_child = _forward_child_events(view)
        if opts.prompt is not None:
            subagents.on_wait = lambda waiting: view.progress(_waiting_line(waiting))
        if opts.as_json:
            assert isinstance(view, _JsonView)
            view.write(
                {
                    "type": "session",
                    "id": agent.session_id,
                    "path": str(opts.session),
                    "restored": restored,
                }
            )
        else:
            resumed = f", {_count_of(restored, 'message')} restored" if opts.resume else ""
            view.note(f"session: {opts.session}{resumed} (continue with --resume)")
        if opts.prompt is not None:
            outcome = await _turn(agent, control, opts.prompt)
            if outcome.reason == "interrupted":
                control.exit_signal = signal.SIGINT
                return 130
            return 0 if outcome.ok else 1
        lines = _Lines(sys.stdin.fileno())
        prompted = False
        floor = 0.0
        while True:
            if not prompted:
                view.prompt()
                prompted = True
            due = agent.due_in()
            if due is not None:
                due = max(due, floor)
            line: str | _Due | None = _DUE
            try:
                # Waiting for the next prompt, but a reminder that comes due runs on time.
                with anyio.move_on_after(math.inf if due is None else due):
                    line = await lines.readline()
            except ValueError as exc:
                view.note(str(exc))
                return 1
            if isinstance(line, _Due):
                outcomes: list[TurnOutcome] = []
                if agent.due_in() == 0:
                    view.note("a scheduled reminder came due")
                    outcomes = await _run_due(agent, control)
                    if outcomes and outcomes[-1].reason == "interrupted":
                        view.note("turn stopped; the session is kept")
                # A source that says "due" but starts nothing must not spin the loop.
                floor = 0.0 if outcomes else 1.0
                prompted = bool(prompted and not outcomes)
                continue
            floor = 0.0
            prompted = False
            if line is None:
                if not opts.as_json:
                    sys.stdout.write("\n")
                return 0
            line = line.strip()
            if not line:
                continue
            if line in ("/exit", "/quit"):
                return 0
            outcome = await _turn(agent, control, line)
            if outcome.reason == "interrupted":
                view.note("turn stopped; the session is kept (Ctrl-C again at the prompt exits)")
    return 0  # pragma: no cover - the loop returns


def _drop_unanswered(
    opts: _Options, store: SessionStore, made: list[Agent], view: _JsonView | _RichView
) -> None:
    """Remove the new session file when no turn of it got an answer from the model."""
    if made and any(m.role == "assistant" for m in made[0].messages):
        return
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{opts.session}{suffix}")
    if made:
        with contextlib.suppress(Exception):
            store.forget(made[0].session_id)
    view.note(f"no model answer: the session file {opts.session} was not kept")


def _count_of(n: int, noun: str) -> str:
    """``1 step``, ``2 steps`` (never ``step(s)``)."""
    return f"{n} {noun if n == 1 else noun + 's'}"


def _waiting_line(waiting: list[str]) -> str:
    """The progress line of a one-shot task that waits for its running descendants."""
    them = "it" if len(waiting) == 1 else "them"
    return f"waiting for {', '.join(waiting)} to finish before exiting (Ctrl-C stops {them})"


_CHILD_EVENTS = ("turn-start", "tool-call", "turn-end", "workflow")


def _forward_child_events(view: _JsonView | _RichView) -> Any:
    """A ``ChildHost.on_child`` that shows each subagent's turns and tool calls as
    ``subagent`` events (``{agentId, parentId, event}``); streamed text stays the child's."""

    def attach(child: Agent) -> None:
        parent_id = child.parent.session_id if child.parent is not None else None

        def forward(event: AgentEvent) -> None:
            if event["type"] in _CHILD_EVENTS:
                view.on_event(
                    {
                        "type": "subagent",
                        "agentId": child.session_id,
                        "parentId": parent_id,
                        "event": event,
                    }
                )

        child.on_event = forward

    return attach


class _Due:
    """The idle wait ended because a reminder came due, not with a line."""


_DUE = _Due()


async def _run_due(agent: Agent, control: _Control) -> list[TurnOutcome]:
    control.turn = AbortController()
    try:
        return await agent.run_due(signal=control.turn.signal)
    finally:
        control.turn = None


def _stdin_is_terminal() -> bool:
    try:
        return os.isatty(sys.stdin.fileno())
    except (AttributeError, OSError, ValueError):
        return False


async def _main(opts: _Options) -> tuple[int, int | None]:
    main = anyio.CancelScope()
    control = _Control(main)
    code = 1

    async def watch(*, task_status: anyio.abc.TaskStatus[None]) -> None:
        with anyio.open_signal_receiver(*_SIGNALS) as signals:
            task_status.started()
            async for signum in signals:
                control.handle(signum)

    async with anyio.create_task_group() as tg:
        await tg.start(watch)
        with main:
            code = await _session(opts, control)
        tg.cancel_scope.cancel()
    if main.cancelled_caught and control.exit_signal is not None:
        return 128 + control.exit_signal, control.exit_signal
    return code, control.exit_signal


# --- the command ----------------------------------------------------------------------


def _inside(path: Path, root: Path) -> bool:
    resolved, base = path.resolve(), root.resolve()
    return resolved == base or base in resolved.parents


def _session_folder(workspace: Path) -> Path:
    """The session folder: the user's own state directory (``$XDG_STATE_HOME`` or
    ``~/.local/state``, then ``codemode/sessions``), or, when that lies inside the
    workspace, a per-user folder under the private state parent. New sessions, subagents'
    sessions and the session index live there."""
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    folder = Path(state_home) / "codemode" / "sessions"
    if _inside(folder, workspace):
        parent = state_parent(workspace)
        if parent is None:
            raise _usage(
                f"workspace {str(workspace)!r} contains every state directory; use --session"
            )
        folder = parent / f"codemode-sessions-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(folder)
    except OSError as exc:
        raise _usage(f"cannot create the session folder {str(folder)!r}: {exc}") from None
    # A shared parent (a temporary directory) lets another user plant the folder first, or
    # a symlink to somewhere else: the transcript would land where they can read it.
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise _usage(
            f"session folder {str(folder)!r} is not a directory owned by you; "
            "remove it or pass --session FILE"
        )
    return folder


def _default_session(folder: Path) -> Path:
    """A new session file in ``folder``."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return folder / f"agent-{stamp}-{os.getpid()}.db"


def _resolve_resume(value: Path, folder: Path) -> Path:
    """``--resume``'s file: the path given, or the file of the session id given."""
    if value.exists() or not str(value).startswith("ses-") or "/" in str(value):
        return value
    try:
        records = SessionStore(folder).sessions()
    except (ValueError, OSError, sqlite3.Error) as exc:
        raise _usage(f"--resume: cannot read the session index in {str(folder)!r}: {exc}") from None
    for record in records:
        if record.id == str(value) and record.path is not None:
            return Path(record.path)
    raise _usage(f"--resume: no session file and no session with id {str(value)!r}")


def _check_resume(path: Path, workspace: Path) -> None:
    try:
        SqliteSessionLog.read(path)
    except (FileNotFoundError, ValueError, sqlite3.Error) as exc:
        raise _usage(f"--resume: {exc}") from None
    if _inside(path, workspace):
        raise _usage(
            f"session file {str(path)!r} is inside the workspace, where the agent's file "
            "tools could change it; put it outside"
        )


def agent_command(
    prompt: Annotated[
        str | None,
        typer.Argument(help="The task. Without it: an interactive session, one prompt per line."),
    ] = None,
    workspace: Annotated[
        Path, typer.Option("--workspace", "-w", help="Directory the built-in tools are bound to.")
    ] = Path("."),
    mode: Annotated[
        str,
        typer.Option(
            "--mode",
            metavar="native|code|both",
            help="How the model sees the tools: as native tools, as run_code with an SDK, or both.",
        ),
    ] = "code",
    lang: Annotated[
        str,
        typer.Option("--lang", "-l", help="Program language of run_code: python or typescript."),
    ] = "python",
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            metavar="URL",
            help=f"OpenAI-compatible API root (env CODEMODE_BASE_URL; default {DEFAULT_BASE_URL}).",
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", metavar="NAME", help="Model name (env CODEMODE_MODEL).")
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(
            "--api-key-env",
            metavar="NAME",
            help="Environment variable holding the API key (default OPENAI_API_KEY; when "
            "that is unset, no key is sent: local servers need none).",
        ),
    ] = None,
    max_steps: Annotated[
        int, typer.Option("--max-steps", min=1, metavar="N", help="Model requests per turn.")
    ] = 50,
    max_retries: Annotated[
        int,
        typer.Option(
            "--max-retries",
            min=0,
            metavar="N",
            help="Retries of a model request on 429, 5xx or a connection failure.",
        ),
    ] = 4,
    session: Annotated[
        Path | None,
        typer.Option("--session", metavar="FILE", help="Keep the session in this SQLite file."),
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(
            "--resume",
            metavar="FILE|ID",
            help="Continue the session in this file (or with this session id).",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the events as JSON lines on stdout.")
    ] = False,
    max_goal_rounds: Annotated[
        int,
        typer.Option(
            "--max-goal-rounds",
            min=1,
            metavar="N",
            help="Automatic goal rounds a new goal may run when the model sets no limit.",
        ),
    ] = 20,
    subagents: Annotated[
        str,
        typer.Option(
            "--subagents",
            metavar="one-shot|continuable",
            help="How `subagent` runs: one-shot (waits; run_in_background makes a job) or "
            "continuable (background by default; send_message, interrupt_agent, report).",
        ),
    ] = "one-shot",
    images: Annotated[
        bool,
        typer.Option(
            "--images",
            help="The model takes images: offer read_image and send the images it reads.",
        ),
    ] = False,
) -> None:
    """Run a model agent over the built-in tools (any OpenAI-compatible Chat Completions server)."""
    from ._app import _check_session_path, _check_workspace

    if mode not in MODES:
        raise _usage(f"--mode must be one of {', '.join(MODES)}, got {mode!r}")
    if subagents not in ("one-shot", "continuable"):
        raise _usage(f"--subagents must be one-shot or continuable, got {subagents!r}")
    if lang not in LANGUAGE_ALIASES:
        raise _usage(f"unknown language {lang!r} (choose from: {', '.join(LANGUAGE_ALIASES)})")
    ws = _check_workspace(workspace)
    url = base_url or os.environ.get("CODEMODE_BASE_URL") or DEFAULT_BASE_URL
    if not url.startswith(("http://", "https://")):
        raise _usage(f"--base-url must be an http(s) URL, got {url!r}")
    name = model or os.environ.get("CODEMODE_MODEL")
    if not name:
        raise _usage("no model named: pass --model NAME or set CODEMODE_MODEL")
    key_name = api_key_env or "OPENAI_API_KEY"
    key = os.environ.get(key_name)
    if key is None and api_key_env is not None:
        # Named on purpose: a missing variable is a mistake, not a keyless server.
        raise _usage(
            f"environment variable {api_key_env} is not set: it holds the model server's API "
            "key (for a server without keys, leave --api-key-env out)"
        )
    key_source = f"the key in ${key_name}" if key is not None else f"${key_name} (not set)"
    folder = _session_folder(ws)
    if resume is not None:
        resume = _resolve_resume(resume, folder)
    if resume is not None and session is not None and resume.resolve() != session.resolve():
        raise _usage("--session and --resume name different files; --resume FILE is enough")
    # Before the checks: checking a --session file opens it, which creates it.
    fresh = resume is None and (session is None or not session.exists())
    if resume is not None:
        _check_resume(resume, ws)
        path = resume
    elif session is not None:
        _check_session_path(session, ws)
        path = session
    else:
        path = _default_session(folder)
    opts = _Options(
        prompt=prompt,
        workspace=ws,
        mode=mode,
        language=LANGUAGE_ALIASES[lang],
        config=ModelConfig(base_url=url, model=name, retry=RetryPolicy(max_retries=max_retries)),
        api_key=key or "",
        key_source=key_source,
        max_steps=max_steps,
        session=path,
        resume=resume is not None,
        as_json=as_json,
        max_goal_rounds=max_goal_rounds,
        folder=folder,
        subagents=subagents,
        fresh=fresh,
        images=images,
    )
    try:
        code, stopped_by = anyio.run(_main, opts)
    except KeyboardInterrupt:
        code, stopped_by = 130, signal.SIGINT
    except ModelError as exc:
        _err.line(("bold red", "error:"), f" {exc}", soft_wrap=True)
        code, stopped_by = 1, None
    if stopped_by is not None:
        word = _SIGNALS.get(signal.Signals(stopped_by), "stopped")
        sys.stderr.write(f"codemode: {word}\n")
        sys.stderr.flush()
    raise typer.Exit(code)
