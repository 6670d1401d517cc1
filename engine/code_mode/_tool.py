"""``run_code``: the reserved code-mode transport tool and its rendering.

The tool validates its arguments, resolves the code runtime, enumerates bindings from
the calling scope's view, runs the program with a run-scoped abort controller and the
single-lane sub-dispatch driver (``_driver.py``), and turns the runtime's result into
``{logs, result?}`` or a ``CODE_RUN_FAILED`` failure.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Awaitable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import msgspec

from .._arguments import refuse_unparsed
from .._errors import CodeRunFailedError, ToolArgsError
from .._signals import AbortController
from .._types import ToolDefinition, ToolOutput, text
from ..json import dumps_pretty
from ..schema import validate_args
from ._driver import SubDispatchDriver
from ._seam import Binding, CodeRunRequest, ErrorClass, Settle, SettlingBinding

if TYPE_CHECKING:
    from .._execution import ToolRunContext
    from .._hooks import HookRegistry
    from .._pipeline import Pipeline
    from .._registry import Registry
    from .._runtime import ToolRuntime

__all__ = [
    "CODE_ONLY_INSTRUCTION",
    "RUN_CODE_FLAVORS",
    "CodeMode",
    "DEFAULT_QUOTED_OUTPUT_CHARS",
    "make_run_code_tool",
    "quote_captured_output",
    "render_run_code_value",
]

CODE_ONLY_INSTRUCTION = (
    "`run_code` is the only tool you can call directly — a tool call naming any other tool "
    "fails. Reach every tool the SDK declares below from inside the program."
)

_DESCRIPTION_PARAM = (
    "Clear, concise description of what this program does in active voice, 5-10 words "
    '(shown in the UI). Examples: "Count TODO markers across packages"; "Read failing test '
    'and its fixture"; "Rename config key in every cordis.yml".'
)

RUN_CODE_FLAVORS: dict[str, tuple[str, str]] = {
    "typescript": (
        "Execute a TypeScript program against the available tools. Takes two required "
        "arguments: `code`, the BODY of an async function (erasable syntax only; top-level "
        "`await` and `return` work), and `description`, a short summary of what the program "
        "does. Call tools as `await tools.name(args)` per the declarations in the system "
        "prompt. Only what you print or return is program output — curate it. Image-bearing "
        "subtool results are attached after the run.",
        "The program: the body of an async TypeScript function.",
    ),
    "python": (
        "Execute a Python program against the available tools. Takes two required arguments: "
        "`code`, the BODY of an async function (top-level `await` and `return` work), and "
        "`description`, a short summary of what the program does. Call tools as "
        "`await tools.name(args)` per the declarations in the system prompt. Use `print(...)` "
        "and/or `return <value>` for program output — curate it. Image-bearing subtool "
        "results are attached after the run.",
        "The program: the body of an async Python function.",
    ),
}

# What JS ``String.prototype.trim`` removes (WhiteSpace and LineTerminator), so a blank
# description is judged the way a JS host judges it (``str.strip()`` differs: it also
# strips U+001C-U+001F and U+0085 but keeps U+FEFF).
_JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)

_OUTPUT_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"logs": {"type": "array", "items": {"type": "string"}}, "result": {}},
    "required": ["logs"],
}


def known_languages() -> str:
    """``"typescript", "python"`` as the error messages list them."""
    return ", ".join(f'"{k}"' for k in RUN_CODE_FLAVORS)


def render_run_code_value(value: Any) -> str:
    """A program's completion value as the model reads it: strings raw, other values as
    2-space JSON whose containers deeper than 10 columns of indentation render compact."""
    if isinstance(value, str):
        return value
    return dumps_pretty(value, indent=2, max_indent=10)


def _render(_args: Any, value: Any) -> list[dict[str, Any]]:
    parts = ["\n".join(value["logs"])]
    if "result" in value:
        parts.append(render_run_code_value(value["result"]))
    body = "\n".join(p for p in parts if p)
    return [text(body or "(run_code completed with no output)")]


def _present_call(args: Any) -> Any:
    if not isinstance(args, dict):
        return None
    code, description = args.get("code"), args.get("description")
    if not isinstance(code, str) or not isinstance(description, str):
        return None
    return {"card": "generic", "title": description, "kind": "execute", "rawInput": code}


class CodeMode:
    """The code-mode side of one ``ToolRuntime``: ``run_code`` and the programs it runs.

    Owned by the runtime; the registry only sees ``definition`` (a provider of the
    ``run_code`` definition for the current code runtime's language), so it never calls
    back into the runtime. ``bind`` hands over the registry and pipeline once they
    exist: programs enumerate their bindings from the registry's view, and every
    sub-call goes through the pipeline's phases.
    """

    def __init__(self, runtime: ToolRuntime, hooks: HookRegistry) -> None:
        self.runtime = runtime
        self.hooks = hooks
        self._registry: Registry | None = None
        self._pipeline: Pipeline | None = None
        self._cache: dict[str, ToolDefinition] = {}

    def bind(self, registry: Registry, pipeline: Pipeline) -> None:
        """Attach the registry and pipeline built with ``definition`` as provider."""
        self._registry = registry
        self._pipeline = pipeline

    @property
    def registry(self) -> Registry:
        """The runtime's registry (after ``bind``)."""
        assert self._registry is not None, "CodeMode.bind() was not called"
        return self._registry

    @property
    def pipeline(self) -> Pipeline:
        """The runtime's pipeline (after ``bind``)."""
        assert self._pipeline is not None, "CodeMode.bind() was not called"
        return self._pipeline

    def language(self) -> str:
        """The code runtime's language (``typescript`` when there is none yet)."""
        code_runtime = self.runtime.code_runtime
        return "typescript" if code_runtime is None else str(code_runtime.language)

    def definition(self) -> ToolDefinition:
        """The ``run_code`` definition for the current language (cached per language)."""
        # ``language()`` inline: the registry asks on every tool look-up.
        code_runtime = self.runtime.code_runtime
        language = "typescript" if code_runtime is None else str(code_runtime.language)
        if language not in RUN_CODE_FLAVORS:
            language = "typescript"  # schemas()/sections report the unknown language
        cached = self._cache.get(language)
        if cached is None:
            cached = self._cache[language] = make_run_code_tool(self, language)
        return cached

    def require_code_runtime(self, mode: str) -> Any:
        """The code runtime a code mode needs; raises when it is missing or unsupported."""
        code_runtime = self.runtime.code_runtime
        if code_runtime is None:
            raise RuntimeError(
                f'codemode: mode "{mode}" requires a code runtime — pass '
                "ToolRuntime(code_runtime=...) (e.g. sandbox.PythonRuntime()) or set the tools "
                'mode to "native"'
            )
        if code_runtime.language not in RUN_CODE_FLAVORS:
            raise RuntimeError(
                "codemode: no SDK renderer registered for runtime language "
                f'"{code_runtime.language}" (known: {known_languages()})'
            )
        return code_runtime


def make_run_code_tool(code_mode: CodeMode, language: str) -> ToolDefinition:
    """Build the ``run_code`` definition for one language flavour."""
    description, code_description = RUN_CODE_FLAVORS[language]
    parameters = {
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": code_description},
            "description": {"type": "string", "description": _DESCRIPTION_PARAM},
        },
        "required": ["code", "description"],
    }

    async def execute(args: Any, ctx: ToolRunContext) -> Any:
        refuse_unparsed(args)
        problems = validate_args(parameters, args)
        if problems:
            raise ToolArgsError(f"invalid arguments: {'; '.join(problems)}", problems)
        if not args["description"].strip(_JS_WHITESPACE):
            raise ValueError("invalid description: expected a non-empty string")
        code_runtime = code_mode.require_code_runtime(code_mode.registry.mode_for(ctx.agent))
        return await _run(code_mode, code_runtime, args["code"], ctx)

    return ToolDefinition(
        name="run_code",
        description=description,
        parameters=parameters,
        output=ToolOutput(schema=_OUTPUT_SCHEMA, render=_render),
        execute=execute,
        present_call=_present_call,
    )


async def _run(code_mode: CodeMode, code_runtime: Any, program: str, outer: ToolRunContext) -> Any:
    controller = AbortController()
    dispose_follow = outer.signal.add_listener(lambda s: controller.abort(s.reason))
    view = code_mode.registry.view(outer.agent)
    names = [n for n in view if n != "run_code"]
    notes = _UnknownKeyNotes()
    # A runtime that raises (a seam or backend bug) becomes an ordinary error result; it
    # is re-raised outside the task group so it is not wrapped in an ExceptionGroup.
    failure: Exception | None = None
    try:
        async with anyio.create_task_group() as tg:
            driver = SubDispatchDriver(
                code_mode.runtime, code_mode.pipeline, code_mode.hooks, outer, controller.signal, tg
            )
            tg.start_soon(driver.loop, name="run_code driver")
            functions = {
                name: notes.watch(name, view[name].parameters, driver.binding(name))
                for name in names
            }
            request = CodeRunRequest(
                program=program,
                bindings=[Binding("tools", functions, ErrorClass("ToolCallError", "toolName"))],
                signal=controller.signal,
            )
            try:
                result = await code_runtime.run(request)
            except Exception as exc:
                failure = exc
            finally:
                controller.abort("run_code settled")
                # Drain: abandon queued calls, await in-flight bodies, finish every
                # ordered commit and pending log append, all inside this run.
                with anyio.CancelScope(shield=True):
                    await driver.drain()
    finally:
        dispose_follow()
    if failure is not None:
        raise failure
    logs = [*result.logs, *notes.lines]
    if result.error is not None:
        error = result.error
        message = f"code run failed ({error.kind}): {error.message}"
        if logs:
            # One join builds the whole message, and the logs are let go before the
            # error is raised: its traceback keeps this frame.
            limit = code_mode.runtime.max_quoted_output_chars
            message, whole = quote_captured_output(message + "\nCaptured output:", logs, limit)
            del logs, result
            if whole:
                # The join held the loop for one copy of the logs (~30 ms for a flood to
                # the 64 MiB cap); the failure result makes another: let the loop run
                # between the two, its due timers included (see ``_yield_to_timers``).
                await _yield_to_timers()
        raise CodeRunFailedError(message, error.kind)
    value: dict[str, Any] = {"logs": logs}
    if result.has_value:
        value["result"] = result.value
    return value


#: ``ToolRuntime(max_quoted_output_chars=...)``'s default: 1 MiB of characters.
DEFAULT_QUOTED_OUTPUT_CHARS = 2**20


def quote_captured_output(header: str, logs: list[str], limit: int | None) -> tuple[str, bool]:
    """``header`` and ``logs`` joined by newlines, and whether all of ``logs`` is quoted.

    With ``limit`` characters of logs or fewer (their newlines counted), or no limit, the
    whole join: the reference's ``Captured output:`` message. Past it, the first and the
    last ``limit // 2`` characters of the join around one line naming how many were left
    out. Why bound it: the message is held twice more (the failure and its ``Error:``
    text), so quoting a flood to the 64 MiB output cap cost the host three copies of it,
    and a model reads no 64 MiB tool result anyway.
    """
    total = sum(map(len, logs)) + len(logs) - 1
    if limit is None or total <= limit:
        return "\n".join([header, *logs]), True
    half = limit // 2
    head = _take(logs, half)
    tail = _take(reversed(logs), half, from_end=True)
    omitted = total - len(head) - len(tail)
    marker = (
        f"[{omitted:,} more characters of captured output not quoted"
        f" (the quote keeps the first and the last {half:,})]"
    )
    return "\n".join([header, head, marker, tail]), False


def _take(logs: Iterable[str], count: int, *, from_end: bool = False) -> str:
    """The first ``count`` characters of ``"\\n".join(logs)`` (the last, ``from_end``,
    with ``logs`` given in reverse)."""
    parts: list[str] = []
    left = count
    for entry in logs:
        if left <= 0:
            break
        piece = entry if len(entry) <= left else (entry[-left:] if from_end else entry[:left])
        parts.append(piece)
        left -= len(piece) + 1  # the newline that joins it to the next
    if from_end:
        parts.reverse()
    return "\n".join(parts)


async def _yield_to_timers() -> None:
    """Let the event loop run what fell due meanwhile, timers' tasks included.

    One checkpoint is not enough on asyncio: the task's resumption is queued before the
    loop's next iteration moves due timers to its ready queue, and a timer only sets its
    task's future there, which queues that task's step once more. Measured with a 2 ms
    heartbeat beside a flood to the 64 MiB cap: with one or two checkpoints the
    heartbeat still waited for both copies (one stall of 70-230 ms); the third queues
    this task's resumption behind the woken tasks.
    """
    for _ in range(3):
        await anyio.lowlevel.checkpoint()


_MAX_KEY_CHARS = 64


class _UnknownKeyNotes:
    """One log line per (tool, key) for argument keys a tool's schema does not declare
    but lets through, naming the closest declared key (``read ignored unknown key
    "limt" (did you mean "limit"?)``): the call still runs with the key passed on, so
    without this a typo silently falls back to a default."""

    # The lines are added after the runtime metered the program's output, so a program
    # sending thousands of distinct keys must not turn them into unmetered log volume.
    MAX_LINES = 20

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._seen: set[tuple[str, str]] = set()
        self._dropped = 0

    @property
    def lines(self) -> list[str]:
        """The notes, in first-seen order, capped at ``MAX_LINES`` plus a summary line."""
        if not self._dropped:
            return list(self._lines)
        return [*self._lines, f"... and {self._dropped} more unknown keys ignored"]

    def watch(self, name: str, parameters: Any, call: SettlingBinding) -> SettlingBinding:
        """``call``, noting undeclared keys first; ``call`` itself when nothing can be."""
        declared = _declared_keys(parameters)
        if not declared:
            return call

        def note(args: Any) -> None:
            if isinstance(args, dict):
                for key in args:
                    if key not in declared and isinstance(key, str):
                        self._note(name, key, declared)

        # A plain function returning the driver's coroutine: no extra coroutine frame
        # per sub-call on the hot path.
        def noting(args: Any = msgspec.UNSET) -> Awaitable[Any]:
            note(args)
            return call(args)

        def begin(args: Any, settle: Settle) -> None:
            note(args)
            call.begin(args, settle)

        return SettlingBinding(name, noting, begin)

    def _note(self, name: str, key: str, declared: frozenset[str]) -> None:
        if (name, key) in self._seen:
            return
        self._seen.add((name, key))
        if len(self._lines) >= self.MAX_LINES:
            self._dropped += 1
            return
        # A key is program data: quote it as JSON (a newline in it must not split the
        # line) and shorten it, so a huge key neither floods the logs nor makes difflib
        # quadratic in its length.
        shown = key if len(key) <= _MAX_KEY_CHARS else key[:_MAX_KEY_CHARS] + "…"
        line = f"{name} ignored unknown key {json.dumps(shown, ensure_ascii=False)}"
        if len(key) <= _MAX_KEY_CHARS:
            close = difflib.get_close_matches(key, sorted(declared), n=1)
            if close:
                line += f' (did you mean "{close[0]}"?)'
        self._lines.append(line)


def _declared_keys(parameters: Any) -> frozenset[str]:
    """Top-level keys an object schema declares, when it also lets others through
    (no ``additionalProperties: false``, which rejects them, nor a schema for extras or
    ``patternProperties``, which declare them in another way); else empty."""
    if not isinstance(parameters, Mapping):
        return frozenset()
    properties = parameters.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        return frozenset()
    if parameters.get("additionalProperties", True) is not True:
        return frozenset()
    if "patternProperties" in parameters:
        return frozenset()
    return frozenset(properties)
