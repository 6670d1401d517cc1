"""``workflow``: a plain JavaScript script that orchestrates subagents at scale.

The model writes the script body; it runs **in the QuickJS guest, in the sandbox**, as a
``run_code`` program of a private code-mode ``ToolRuntime`` over a host-owned
``TypeScriptRuntime`` (``WORKFLOW_LIMITS``: long wall clock, small CPU budget — the script
only coordinates). Each run gets its own scope of that runtime, whose session is the
calling agent's log, and four host tools bound to the run: ``agent``, ``phase``, ``log``
and ``misuse``. A prelude defines the catalog's hooks over them::

    agent(prompt, opts?)         -> tools.agent({prompt, opts})   (a child; null on failure)
    pipeline(items, ...stages)   per-item chains, no barrier between stages
    parallel(thunks)             all at once, a barrier; a throwing thunk is null
    phase(title), log(message)   progress, shown by the host (``workflow`` agent events)
    args                         the call's ``args``, verbatim (``JSON.parse``d)

so every ``agent()`` goes back to the host like any binding call — through the private
runtime's pipeline, with its ``tool/code-dispatch`` events in the caller's session — and
the sub-dispatch driver bounds how many run at once (``max_concurrency``, default 8).
Binding results reach the script in submission order (the driver's head-of-line commit),
so a later stage of one item starts as soon as its own earlier stage was delivered, never
waiting for other items' later stages; ``pipeline`` has no barrier of its own.

Children are made by the tree's ``ChildHost`` under the calling agent: its workspace, its
tools and every guard on its scope chain; the call's abort signal reaches each of them.
A child talks to the caller's model unless ``opts.provider`` / ``opts.model`` say otherwise,
or the phase it belongs to (``opts.phase``, else the current ``phase()``) declares a
``provider`` / ``model`` in ``meta.phases``. With ``opts.schema`` (an object-rooted schema in the enforced subset: ``type``,
``properties``, ``required``, ``additionalProperties``, ``items``, ``enum``, ``const``,
``oneOf``, plus annotations) the child is asked to end with a JSON value; one that does not
validate gets one repair turn, then ``null``.

Misuse always kills the script, whatever it catches: bad hook arguments, unknown
``opts`` keys (``effort``, ``isolation``, ``agentType``, ...), unsupported schemas, the
total-agent cap (``max_agents``, default 100) or the tree's subagent caps. The hook that
finds it records the message and aborts the run's signal, so the guest is stopped even
inside ``try/catch``, and the call fails ``workflow run failed: {message}``.

Value ``{runId, agentsStarted, result}``; render ``workflow "{name}" completed ({n}
agent|agents).↵Return value:↵{JSON.stringify(result, null, 2)}``, the JSON cut at 50,000
characters with ``↵… [truncated: {k} more characters]``. Errors (``WorkflowError``):
``WORKFLOW_META`` and ``WORKFLOW_SCRIPT`` before anything runs (an ``export`` statement,
TypeScript syntax, a syntax error), ``WORKFLOW_NO_AGENT``, ``workflow run was cancelled
({reason})`` (``WORKFLOW_CANCELLED``), ``workflow run failed: {error}``
(``WORKFLOW_FAILED``).
"""

from __future__ import annotations

import functools
import json
import re
import secrets
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import tree_sitter
import tree_sitter_typescript

from codemode.engine import (
    AbortController,
    JsonSchemaError,
    ToolDefinition,
    ToolExecutionInput,
    ToolOutput,
    ToolRuntime,
    define_tool,
    reason_text,
    text,
)
from codemode.engine.json import dumps_pretty
from codemode.engine.schema import assert_object_json_schema, validate_json_schema_value
from codemode.tools import define_catalog_tool

from ._children import ChildHost, ChildLimitError, json_candidates
from ._errors import WorkflowError
from ._loop import Agent, agent_for
from ._model import ModelClient

__all__ = ["WORKFLOW_LIMITS", "WorkflowRuntime", "build_workflow_tool", "render_workflow_value"]

MAX_RESULT_CHARS = 50_000
MAX_SCRIPT_CHARS = 256 * 1024
MAX_ARGS_BYTES = 4 * 2**20
_KEBAB = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_OPTS = ("schema", "label", "phase", "provider", "model")


def _workflow_limits() -> Any:
    from codemode.sandbox import Limits

    # The script waits on children for most of its life (minutes, not seconds): a long
    # wall clock; its own work is coordination, so little CPU and memory.
    return Limits(
        max_compute_ms=30_000,
        max_wall_ms=4 * 3600_000,
        max_memory_bytes=256 * 2**20,
        max_output_bytes=16 * 2**20,
        pool_size=1,
    )


#: The ``Limits`` a host's workflow ``TypeScriptRuntime`` should use (4 h wall, 30 s CPU).
WORKFLOW_LIMITS = _workflow_limits()


class WorkflowRuntime:
    """The QuickJS runtime workflow scripts run in: a ``TypeScriptRuntime`` (``limits``,
    default ``WORKFLOW_LIMITS``) started on the first script and stopped when the host
    leaves ``async with``, so a session that never runs a workflow never boots a sandbox
    for one. It is a ``CodeRuntime`` (``language``, ``isolation``, ``run``).

    A sandbox that cannot start (a machine without the kernel features it needs) makes
    each workflow call fail with ``workflow is unavailable: its QuickJS sandbox did not
    start (...)`` instead of failing the host.
    """

    language = "typescript"
    isolation = "process"

    def __init__(self, limits: Any = None) -> None:
        self.limits = limits if limits is not None else WORKFLOW_LIMITS
        self._group: anyio.abc.TaskGroup | None = None
        self._runtime: Any = None
        self._ready: anyio.Event | None = None
        self._stop: anyio.Event | None = None  # made on entry: anyio needs a running loop
        self._error: str | None = None

    async def __aenter__(self) -> WorkflowRuntime:
        self._stop = anyio.Event()
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        if self._stop is not None:
            self._stop.set()
        group, self._group = self._group, None
        return None if group is None else await group.__aexit__(exc_type, exc, tb)

    @property
    def started(self) -> bool:
        """Whether the sandbox is running now."""
        return self._runtime is not None

    async def start(self) -> None:
        """Start the sandbox (once) and wait until it runs; ``WorkflowError`` if it cannot."""
        if self._runtime is not None:
            return
        if self._ready is None:
            if self._group is None:
                raise WorkflowError(
                    "workflow is unavailable: its runtime is not running (enter the "
                    "WorkflowRuntime with `async with`)",
                    "WORKFLOW_FAILED",
                )
            self._ready = anyio.Event()
            self._group.start_soon(self._hold, name="workflow sandbox")
        await self._ready.wait()
        if self._runtime is None:
            reason = self._error or "it was stopped"
            raise WorkflowError(
                f"workflow is unavailable: its QuickJS sandbox did not start ({reason})",
                "WORKFLOW_FAILED",
            )

    async def _hold(self) -> None:
        from codemode.sandbox import TypeScriptRuntime

        assert self._ready is not None and self._stop is not None
        try:
            async with TypeScriptRuntime(limits=self.limits) as runtime:
                self._runtime = runtime
                self._ready.set()
                await self._stop.wait()
        except Exception as exc:
            self._error = f"{type(exc).__name__}: {exc}"
        finally:
            self._runtime = None
            self._ready.set()

    async def run(self, request: Any) -> Any:
        """Run one script program (the ``CodeRuntime`` seam), starting the sandbox first."""
        await self.start()
        return await self._runtime.run(request)


# ----------------------------------------------------------------- static checks

# Syntax that is TypeScript, not JavaScript (the grammar parses both).
_TS_ONLY = frozenset(
    {
        "type_annotation",
        "type_alias_declaration",
        "interface_declaration",
        "enum_declaration",
        "as_expression",
        "satisfies_expression",
        "non_null_expression",
        "type_arguments",
        "type_parameters",
        "abstract_class_declaration",
        "ambient_declaration",
        "module",
        "internal_module",
        "accessibility_modifier",
        "optional_type",
        "implements_clause",
        "type_predicate_annotation",
        "asserts_annotation",
        "opting_type_annotation",
        "omitting_type_annotation",
    }
)
_WRAP_HEAD = "async function __workflow__() {\n"


@functools.cache
def _language() -> tree_sitter.Language:
    return tree_sitter.Language(tree_sitter_typescript.language_typescript())


def _parser() -> tree_sitter.Parser:
    # A parser holds mutable state: one per script check (cheap); the grammar is shared.
    return tree_sitter.Parser(_language())


def _check_script(script: str) -> None:
    """Refuse what is not a plain JavaScript body, before a worker is spent on it."""
    if not script.strip():
        raise WorkflowError("invalid workflow script: the script is empty", "WORKFLOW_SCRIPT")
    if len(script) > MAX_SCRIPT_CHARS:
        raise WorkflowError(
            f"invalid workflow script: {len(script)} characters (the limit is {MAX_SCRIPT_CHARS})",
            "WORKFLOW_SCRIPT",
        )
    # Parsed as a function body, as it will run (top-level await and return are legal).
    tree = _parser().parse((_WRAP_HEAD + script + "\n}").encode("utf-8"))
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        line = node.start_point[0]  # the wrapper's first line shifts rows by one
        if node.type == "export_statement" or (
            node.type == "ERROR" and node.text is not None and node.text.startswith(b"export")
        ):
            raise WorkflowError(
                f"invalid workflow script: line {line}: an export statement; the script is a "
                "plain body (meta is the tool's meta parameter, not `export const meta`)",
                "WORKFLOW_SCRIPT",
            )
        if node.type in _TS_ONLY:
            raise WorkflowError(
                f"invalid workflow script: line {line}: TypeScript syntax ({node.type}); the "
                "script must be plain JavaScript",
                "WORKFLOW_SCRIPT",
            )
        if node.type == "ERROR" or node.is_missing:
            snippet = (node.text or b"").decode("utf-8", "replace").strip().splitlines()
            near = f" near {snippet[0][:60]!r}" if snippet else ""
            raise WorkflowError(
                f"invalid workflow script: line {max(line, 1)}: syntax error{near}",
                "WORKFLOW_SCRIPT",
            )
        stack.extend(reversed(node.children))


def _check_meta(meta: Any, providers: Mapping[str, Any]) -> dict[str, Any]:
    def bad(message: str) -> WorkflowError:
        return WorkflowError(f"invalid workflow meta: {message}", "WORKFLOW_META")

    name = meta.get("name")
    if not isinstance(name, str) or not _KEBAB.fullmatch(name) or len(name) > 64:
        raise bad(f'meta.name must be short kebab-case (e.g. "audit-files"), got {name!r}')
    if not str(meta.get("description", "")).strip():
        raise bad("meta.description must be a non-empty string")
    titles: set[str] = set()
    for i, phase in enumerate(meta.get("phases") or ()):
        title = phase.get("title", "")
        if not title.strip():
            raise bad(f"meta.phases[{i}].title must be a non-empty string")
        if title in titles:
            raise bad(f"meta.phases[{i}].title {title!r} is declared twice")
        titles.add(title)
        provider = phase.get("provider")
        if provider is not None and provider not in providers:
            offered = ", ".join(sorted(providers)) or "none"
            raise bad(
                f"meta.phases[{i}].provider {provider!r} is not a provider of this host "
                f"(it offers: {offered})"
            )
    return dict(meta)


# ----------------------------------------------------------------------- the run

_PRELUDE = r"""
const __hooks = tools;
let __killed = null;
// phase() and log() need no await; the run waits for them before it returns.
const __pending = [];
class WorkflowMisuseError extends Error {
  constructor(message) { super(message); this.name = "WorkflowMisuseError"; }
}
async function __misuse(message) {
  if (__killed === null) __killed = message;
  // The host aborts the run on this call: no catch in the script survives it.
  try { await __hooks.misuse({ message }); } catch (_) {}
  throw new WorkflowMisuseError(message);
}
function __plain(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
async function agent(prompt, opts) {
  if (typeof prompt !== "string" || prompt.trim() === "")
    await __misuse("agent(prompt, opts?): prompt must be a non-empty string");
  if (opts !== undefined && opts !== null && !__plain(opts))
    await __misuse("agent(prompt, opts?): opts must be an object");
  let reply;
  try {
    reply = await __hooks.agent({ prompt, opts: opts ?? {} });
  } catch (error) {
    // The hook only fails for misuse (a failed child resolves null).
    if (__killed === null) __killed = String(error && error.message);
    throw error;
  }
  return reply.value;
}
async function pipeline(items, ...stages) {
  if (!Array.isArray(items))
    await __misuse("pipeline(items, ...stages): items must be an array");
  if (stages.length === 0 || stages.some((stage) => typeof stage !== "function"))
    await __misuse("pipeline(items, ...stages): every stage must be a function");
  return await Promise.all(items.map(async (item, index) => {
    let prev = item;
    for (const stage of stages) {
      try {
        prev = await stage(prev, item, index);
      } catch (error) {
        if (__killed !== null || error instanceof WorkflowMisuseError) throw error;
        return null;
      }
    }
    return prev;
  }));
}
async function parallel(thunks) {
  if (!Array.isArray(thunks) || thunks.some((thunk) => typeof thunk !== "function"))
    await __misuse("parallel(thunks): thunks must be an array of zero-argument functions");
  return await Promise.all(thunks.map(async (thunk) => {
    try {
      return await thunk();
    } catch (error) {
      if (__killed !== null || error instanceof WorkflowMisuseError) throw error;
      return null;
    }
  }));
}
function phase(title) {
  if (typeof title !== "string" || title.trim() === "") {
    __misuse("phase(title): title must be a non-empty string").catch(() => {});
    return;
  }
  const sent = __hooks.phase({ title }).then(() => undefined, () => undefined);
  __pending.push(sent);
  return sent;
}
function log(message) {
  if (typeof message !== "string") {
    __misuse("log(message): message must be a string").catch(() => {});
    return;
  }
  const sent = __hooks.log({ message }).then(() => undefined, () => undefined);
  __pending.push(sent);
  return sent;
}
"""


def _program(script: str, args: Any) -> tuple[str, int]:
    """The ``run_code`` program for ``script``, and how many lines precede the script."""
    # ``args`` travels as a JSON string literal parsed in the guest: an object literal
    # would give a "__proto__" key its special meaning.
    literal = json.dumps(json.dumps(args, ensure_ascii=False))
    head = (
        f"{_PRELUDE}\nconst args = JSON.parse({literal});\n"
        # The script sees the hooks but neither the raw bindings nor timers.
        "const __value = await (async (tools, setTimeout, setInterval, clearTimeout, "
        "clearInterval) => {\n"
    )
    tail = "\n})();\nawait Promise.all(__pending);\nreturn __value;\n"
    return head + script + tail, head.count("\n")


_FRAME = re.compile(r"<program>:(\d+)")


def _script_lines(message: str, offset: int, lines: int) -> str:
    """``message`` with the program's line numbers as the script's own (``<script>:3``);
    stack frames inside the prelude and the wrapper are dropped."""
    out = []
    for line in message.split("\n"):
        match = _FRAME.search(line)
        if match is None:
            out.append(line)
            continue
        n = int(match.group(1)) - offset
        if 1 <= n <= lines:
            out.append(line[: match.start()] + f"<script>:{n}" + line[match.end() :])
    return "\n".join(out)


_FAILED = re.compile(r"code run failed \((?P<kind>[^)]*)\): ")


def _answer_json(answer: str) -> tuple[bool, Any]:
    for raw in json_candidates(answer):
        try:
            return True, json.loads(raw)
        except (ValueError, RecursionError):  # model text: malformed, or nested past the parser
            continue
    return False, None


class _Run:
    """One workflow run's state, shared by its hooks."""

    def __init__(
        self, parent: Agent, host: ChildHost, meta: dict[str, Any], kill: AbortController
    ) -> None:
        self.id = f"workflow-{secrets.token_hex(6)}"
        self.parent = parent
        self.host = host
        self.meta = meta
        self.kill = kill
        self.started = 0
        self.running = 0
        self.done = 0
        self.failed = 0
        self.phase: str | None = None
        self.misuse: str | None = None

    def emit(self, event: str, **fields: Any) -> None:
        self.parent.emit(
            {
                "type": "workflow",
                "runId": self.id,
                "name": self.meta["name"],
                "event": event,
                "phase": self.phase,
                "started": self.started,
                "running": self.running,
                "done": self.done,
                "failed": self.failed,
                **fields,
            }
        )

    def refuse(self, message: str) -> WorkflowError:
        if self.misuse is None:
            self.misuse = message
            self.kill.abort(f"workflow hook misused: {message}")
        return WorkflowError(message, "WORKFLOW_FAILED")


_ANY_VALUE = ToolOutput(
    schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {"value": {"type": "json"}},
    },
    render=lambda _args, value: [text(json.dumps(value.get("value")))],
)
_OK = ToolOutput(
    schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {"ok": {"type": "boolean", "required": True}},
    },
    render=lambda _args, _value: [text("ok")],
)


def _hook_tools(
    run: _Run, max_agents: int, providers: Mapping[str, ModelClient]
) -> list[ToolDefinition]:
    def check_opts(opts: dict[str, Any]) -> None:
        unknown = [k for k in opts if k not in _OPTS]
        if unknown:
            raise run.refuse(
                f"agent(): unknown {'option' if len(unknown) == 1 else 'options'} "
                f"{', '.join(json.dumps(k) for k in unknown)} "
                f"(allowed: {', '.join(_OPTS)})"
            )
        for key in ("label", "phase", "provider", "model"):
            if key in opts and opts[key] is not None and not isinstance(opts[key], str):
                raise run.refuse(f"agent(): opts.{key} must be a string")
        if opts.get("schema") is not None:
            try:
                assert_object_json_schema(opts["schema"], label="opts.schema")
            except JsonSchemaError as exc:
                raise run.refuse(f"agent(): {exc}") from None

    async def agent_body(args: Any, ctx: Any) -> Any:
        prompt: str = args["prompt"]
        opts: dict[str, Any] = dict(args.get("opts") or {})
        check_opts(opts)
        if run.started >= max_agents:
            from ._words import count_of

            raise run.refuse(
                f"agent(): the workflow already started {count_of(run.started, 'agent')} (the cap is "
                f"{max_agents}); coordinate fewer, larger tasks"
            )
        # The LLM target: the call's own overrides, else what the phase it names (or the
        # current one) declares in meta.phases, else the caller's client.
        group = opts.get("phase") or run.phase
        declared: dict[str, Any] = next(
            (p for p in run.meta.get("phases") or () if p.get("title") == group), {}
        )
        provider = opts.get("provider") or declared.get("provider")
        model = opts.get("model") or declared.get("model")
        if provider and provider not in providers:
            offered = ", ".join(sorted(providers)) or "none"
            raise run.refuse(
                f"agent(): unknown provider {provider!r} (this host offers: {offered})"
            )
        client = providers[provider] if provider else None
        if model:
            client = (client or run.parent.client).with_model(model)
        label = opts.get("label") or prompt.strip().splitlines()[0][:60]
        try:
            child = run.host.make_child(run.parent, label=label, client=client)
        except ChildLimitError as exc:
            raise run.refuse(f"agent(): {exc.message}") from None
        run.started += 1
        run.running += 1
        schema = opts.get("schema")
        run.emit("agent-start", agentId=child.session_id, label=label, group=opts.get("phase"))
        ok = False
        value: Any = None
        try:
            task = prompt
            if schema is not None:
                task += (
                    "\n\nEnd your final answer with one JSON value in a ```json fence that "
                    "matches this JSON Schema:\n" + json.dumps(schema, indent=2)
                )
            result = await run.host.run_child(run.parent, task, child=child, signal=ctx.signal)
            if result.ok and schema is None:
                ok, value = True, result.text
            elif result.ok:
                for attempt in (0, 1):
                    parsed, data = _answer_json(result.text)
                    problems = (
                        validate_json_schema_value(schema, data)
                        if parsed
                        else ["the answer holds no JSON value"]
                    )
                    if not problems:
                        ok, value = True, data
                        break
                    if attempt == 1 or ctx.signal.aborted:
                        break
                    # One repair turn, in the same child (it keeps its context).
                    result = await run.host.run_child(
                        run.parent,
                        "Your answer did not match the required JSON Schema: "
                        + "; ".join(problems[:10])
                        + ". Reply with only the corrected JSON value in a ```json fence.",
                        child=child,
                        signal=ctx.signal,
                    )
                    if not result.ok:
                        break
        finally:
            run.running -= 1
            if ok:
                run.done += 1
            else:
                run.failed += 1
            run.emit("agent-end", agentId=child.session_id, label=label, ok=ok)
        return {"value": value}

    async def phase_body(args: Any, _ctx: Any) -> Any:
        run.phase = args["title"]
        declared = {p["title"]: p for p in run.meta.get("phases") or ()}
        detail = declared.get(run.phase, {}).get("detail")
        run.emit("phase", title=run.phase, detail=detail)
        return {"ok": True}

    async def log_body(args: Any, _ctx: Any) -> Any:
        run.emit("log", message=args["message"][:2000])
        return {"ok": True}

    async def misuse_body(args: Any, _ctx: Any) -> Any:
        raise run.refuse(args["message"][:2000])

    def safe(_args: Any) -> bool:
        return True

    def hook(name: str, params: dict[str, Any], body: Any, output: ToolOutput) -> ToolDefinition:
        return define_tool(
            name=name,
            description=f"workflow hook {name}",
            parameters=params,
            output=output,
            execute=body,
            is_concurrency_safe=safe,
        )

    string = {"type": "string", "required": True}
    return [
        hook(
            "agent",
            {"prompt": string, "opts": {"type": "object", "additionalProperties": True}},
            agent_body,
            _ANY_VALUE,
        ),
        hook("phase", {"title": string}, phase_body, _OK),
        hook("log", {"message": string}, log_body, _OK),
        hook("misuse", {"message": string}, misuse_body, _OK),
    ]


# ---------------------------------------------------------------------- the tool


def render_workflow_value(meta_name: str, value: Mapping[str, Any]) -> str:
    """The model-facing text of a workflow value (the catalog's render)."""
    n = value["agentsStarted"]
    body = dumps_pretty(value.get("result"), indent=2)
    if len(body) > MAX_RESULT_CHARS:
        rest = len(body) - MAX_RESULT_CHARS
        body = body[:MAX_RESULT_CHARS] + f"\n… [truncated: {rest} more characters]"
    agents = "agent" if n == 1 else "agents"
    return f'workflow "{meta_name}" completed ({n} {agents}).\nReturn value:\n{body}'


def build_workflow_tool(
    code_runtime: Any,
    *,
    max_concurrency: int = 8,
    max_agents: int = 100,
    providers: Mapping[str, ModelClient] | None = None,
) -> ToolDefinition:
    """The ``workflow`` tool, running scripts in ``code_runtime``: a ``WorkflowRuntime``
    the host entered (started on first use), or any ``TypeScriptRuntime`` it opened (with
    ``WORKFLOW_LIMITS`` or as long a wall clock: a workflow waits for minutes).

    ``max_concurrency`` bounds the children running at once in one run, ``max_agents`` the
    children one run may start (the tree's ``ChildHost`` caps apply as well);
    ``providers`` are the named model clients ``opts.provider`` may pick (``opts.model``
    alone keeps the caller's server and changes the model name).
    """
    if getattr(code_runtime, "language", None) != "typescript":
        raise ValueError("build_workflow_tool needs a TypeScript code runtime (QuickJS guest)")
    for name, value in (("max_concurrency", max_concurrency), ("max_agents", max_agents)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"build_workflow_tool({name}=...) must be a positive integer")
    offered = dict(providers or {})
    engine = ToolRuntime(
        mode="code", max_parallel_sub_calls=max_concurrency, code_runtime=code_runtime
    )

    async def execute(args: Any, ctx: Any) -> Any:
        parent = agent_for(ctx.agent)
        if parent is None:
            raise WorkflowError(
                "workflow requires a calling agent (exec.agent was undefined)",
                "WORKFLOW_NO_AGENT",
            )
        host = ChildHost.of(parent)
        if host is None:
            raise WorkflowError(
                "workflow is unavailable: this agent session cannot start subagents",
                "WORKFLOW_NO_AGENT",
            )
        meta = _check_meta(args["meta"], offered)
        script: str = args["script"]
        _check_script(script)
        script_args = args.get("args") or {}
        if len(json.dumps(script_args)) > MAX_ARGS_BYTES:
            raise WorkflowError(
                f"invalid workflow script: args exceed {MAX_ARGS_BYTES} bytes as JSON",
                "WORKFLOW_SCRIPT",
            )
        if isinstance(code_runtime, WorkflowRuntime):
            await code_runtime.start()  # a sandbox that cannot start fails here, named
        kill = AbortController()
        run = _Run(parent, host, meta, kill)
        follow = ctx.signal.add_listener(lambda s: kill.abort(s.reason))
        scope = engine.scope(f"{parent.scope.name}/{run.id}", session=parent.scope.session)
        disposers = [scope.register(tool) for tool in _hook_tools(run, max_agents, offered)]
        run.emit("start", description=meta["description"])
        outcome = "failed"
        try:
            program, offset = _program(script, script_args)
            result = await engine.execute(
                ToolExecutionInput(
                    call_id=f"{ctx.call_id}/{run.id}",
                    name="run_code",
                    arguments={"code": program, "description": meta["name"]},
                    signal=kill.signal,
                    agent=scope,
                )
            )
            if ctx.signal.aborted:
                outcome = "cancelled"
                raise WorkflowError(
                    f"workflow run was cancelled ({reason_text(ctx.signal.reason)})",
                    "WORKFLOW_CANCELLED",
                )
            if run.misuse is not None:
                raise WorkflowError(f"workflow run failed: {run.misuse}", "WORKFLOW_FAILED")
            if result.is_error:
                message = _FAILED.sub("", result.error.message, count=1)
                message = _script_lines(message, offset, script.count("\n") + 1)
                raise WorkflowError(f"workflow run failed: {message}", "WORKFLOW_FAILED")
            outcome = "completed"
            return {
                "runId": run.id,
                "agentsStarted": run.started,
                "result": result.value.get("result"),
            }
        finally:
            follow()
            for dispose in disposers:
                dispose()
            run.emit("end", outcome=outcome)

    return define_catalog_tool(
        "workflow",
        output=ToolOutput(
            schema={
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "runId": {"type": "string", "required": True},
                    "agentsStarted": {"type": "integer", "required": True},
                    "result": {"type": "json", "required": True},
                },
            },
            render=lambda args, value: [text(render_workflow_value(args["meta"]["name"], value))],
        ),
        execute=execute,
        present_call=lambda args: {"card": "generic", "title": f"workflow: {args['meta']['name']}"},
    )
