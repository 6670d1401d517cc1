"""Import the tools of upstream MCP servers into a ``ToolRuntime`` as raw definitions.

``connect_upstreams([...])`` connects to every upstream at once (an ``mcp.Client`` each:
a stdio subprocess, a streamable-HTTP URL or an in-process SDK server), lists their
tools and builds one ``codemode.engine.ToolDefinition`` per tool:

- ``parameters``: the tool's input schema normalised into the enforced subset
  (``_schema.normalize_schema``); ``output.schema``: its output schema, normalised the
  same way, or ``{}`` (any value) when it has none. When the output schema is exactly
  MCPServer's ``{"result": x}`` wrapper (an object whose only, required property is
  ``result``), the wrapper is unwrapped: the value is ``x`` and the schema ``x``'s.
- ``execute``: ``tools/call`` on the upstream, cancelled when the call's signal aborts.
  The value is ``structured_content`` when the server sent one, else the text blocks
  joined by newlines (a block that is not text is named in brackets). A result with
  ``is_error`` raises ``McpToolError`` with the server's text, so it is an ordinary
  failure result.
- ``is_concurrency_safe``: the tool's ``read_only_hint`` (``parallel="read-only"``),
  every tool (``"all"``) or none (``"none"``). The engine runs a parallel-safe
  sub-call concurrently with others (up to ``max_parallel_sub_calls``) and an
  exclusive one alone.

Names are kept as the server spells them, identifiers or not (``get-note`` is reached as
``tools["get-note"]`` in both SDK languages). When two upstreams list the same name,
``on_collision="mangle"`` (the default) renames *every* holder of that name to
``<upstream>__<name>`` (deterministic: it does not depend on connection order, and
reversible: ``split_mangled``), and ``"error"`` raises ``McpImportError`` naming both
upstreams. Upstream names must be unique and free of ``__``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import anyio
import msgspec

from codemode.engine import (
    AbortError,
    HarnessError,
    ToolDefinition,
    ToolOutput,
    reason_text,
    text,
)
from codemode.engine.json import dumps_pretty

from ._schema import McpSchemaError, normalize_schema

__all__ = [
    "ImportedTool",
    "ImportedTools",
    "McpImportError",
    "McpToolError",
    "Upstream",
    "connect_upstreams",
    "mangle",
    "split_mangled",
    "tool_definition",
]

ParallelPolicy = Literal["read-only", "all", "none"]

MANGLE_SEPARATOR = "__"
# The code-mode transport's name: an upstream tool of that name is always mangled.
RESERVED_NAME = "run_code"


class McpToolError(HarnessError):
    """An upstream MCP tool answered ``is_error`` (or its call failed); the message is
    the server's text."""

    code = "MCP_TOOL_ERROR"


class McpImportError(HarnessError):
    """Upstream tools that cannot be imported together (a name collision with
    ``on_collision="error"``, a duplicate upstream name, ...)."""

    code = "MCP_IMPORT_ERROR"


class Upstream(msgspec.Struct, frozen=True, kw_only=True):
    """One upstream MCP server: what ``mcp.Client`` connects to, and a name for it.

    ``target`` is an ``mcp.StdioServerParameters``, a streamable-HTTP URL, or an
    in-process ``mcp`` ``Server``/``MCPServer`` (tests). Build one with ``stdio``,
    ``http`` or ``memory``. ``name`` labels errors and prefixes mangled tool names.
    """

    name: str
    target: Any

    @staticmethod
    def stdio(
        command: str | Sequence[str],
        *,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> Upstream:
        """A subprocess speaking MCP on its stdin/stdout.

        ``command`` is a shell-like string (split with ``shlex``) or an argv list.
        ``env`` is the subprocess's environment, given explicitly: by default a copy of
        this process's whole environment (the SDK on its own passes only a handful of
        variables such as ``PATH`` and ``HOME``, which breaks servers that need e.g. an
        API key or ``NODE_PATH``).
        """
        from mcp import StdioServerParameters

        argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not argv:
            raise ValueError("an stdio upstream needs a command")
        environment = dict(os.environ if env is None else env)
        label = name or _default_name(argv)
        return Upstream(
            name=label,
            target=StdioServerParameters(
                command=argv[0],
                args=argv[1:],
                env=environment,
                cwd=None if cwd is None else os.fspath(cwd),
            ),
        )

    @staticmethod
    def http(url: str, *, name: str | None = None) -> Upstream:
        """A streamable-HTTP MCP endpoint (``http://host:port/mcp``)."""
        return Upstream(name=name or _safe_name(re.sub(r"^\w+://", "", url)), target=url)

    @staticmethod
    def memory(server: Any, *, name: str | None = None) -> Upstream:
        """An in-process ``mcp`` ``Server`` or ``MCPServer`` (for tests and embedding)."""
        label = name or str(getattr(server, "name", None) or "server")
        return Upstream(name=_safe_name(label), target=server)


def _safe_name(raw: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]+", "_", raw).strip("_")
    while MANGLE_SEPARATOR in name:
        name = name.replace(MANGLE_SEPARATOR, "_")
    return name or "server"


def _default_name(argv: list[str]) -> str:
    # ``python path/to/notes_server.py`` -> ``notes_server``; ``npx -y @x/server-github``
    # -> ``server_github``: the last argument that is not an option names it best.
    words = [a for a in argv if not a.startswith("-")]
    last = os.path.basename(words[-1] if words else argv[0])
    last = re.sub(r"\.(py|js|mjs|ts)$", "", last)
    return _safe_name(last)


def mangle(upstream: str, tool: str) -> str:
    """The name a colliding ``tool`` of ``upstream`` is registered under."""
    return f"{upstream}{MANGLE_SEPARATOR}{tool}"


def split_mangled(name: str) -> tuple[str, str] | None:
    """``(upstream, tool)`` of a mangled name, or None when ``name`` is not mangled.

    Upstream names never contain ``__``, so the first separator is the boundary.
    """
    upstream, sep, tool = name.partition(MANGLE_SEPARATOR)
    if not sep or not upstream or not tool:
        return None
    return upstream, tool


def _is_result_wrapper(schema: Any) -> bool:
    return (
        isinstance(schema, Mapping)
        and schema.get("type") == "object"
        and isinstance(schema.get("properties"), Mapping)
        and list(schema["properties"]) == ["result"]
        and list(schema.get("required") or []) == ["result"]
    )


def _content_text(content: Sequence[Any]) -> str:
    parts = []
    for block in content:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "image" or kind == "audio":
            parts.append(f"[{kind}: {block.mime_type}, {len(block.data) * 3 // 4} bytes]")
        elif kind == "resource":
            resource = block.resource
            body = getattr(resource, "text", None)
            parts.append(body if isinstance(body, str) else f"[resource: {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource link: {block.uri}]")
        else:
            parts.append(f"[{kind} content]")
    return "\n".join(parts)


def _render(_args: Any, value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        return [text(value)]
    return [text(dumps_pretty(value, indent=2, max_indent=10))]


def _description(tool: Any) -> str:
    description = tool.description or ""
    title = tool.title or (tool.annotations.title if tool.annotations else None)
    if title and title not in description:
        description = f"{title}. {description}" if description else title
    return description


def tool_definition(
    tool: Any,
    call: Callable[[str, dict[str, Any]], Any],
    *,
    name: str | None = None,
    upstream: str = "upstream",
    parallel: ParallelPolicy = "read-only",
    timeout_ms: float | None = None,
) -> ToolDefinition:
    """One raw ``ToolDefinition`` for the MCP ``tool`` (an ``mcp.types.Tool``).

    ``call(original_name, arguments)`` performs ``tools/call`` and returns the
    ``CallToolResult``; ``name`` is the registered name (default: the tool's own);
    ``timeout_ms`` bounds each call (enforced by an installed ``TimeoutPolicy``). Raises ``McpSchemaError`` when the input schema cannot be represented.
    """
    original = tool.name
    registered = name or original
    parameters = normalize_schema(tool.input_schema, tool=original)
    unwrap = False
    output_schema: dict[str, Any] = {}
    if tool.output_schema is not None:
        raw_output = tool.output_schema
        if _is_result_wrapper(raw_output):
            unwrap = True
            raw_output = raw_output["properties"]["result"]
        try:
            output_schema = normalize_schema(raw_output, tool=original, root_object=False)
        except McpSchemaError:
            # The output schema only documents the value (and checks it): one outside the
            # subset is dropped rather than keeping the tool out of the catalog.
            output_schema = {}

    read_only = bool(tool.annotations and tool.annotations.read_only_hint)
    safe = parallel == "all" or (parallel == "read-only" and read_only)

    async def execute(args: Any, ctx: Any) -> Any:
        arguments = dict(args) if isinstance(args, Mapping) else {}
        if not isinstance(args, Mapping) and args is not None:
            raise McpToolError(f'MCP tool "{original}" takes an object of arguments')
        signal = ctx.signal
        result: Any = None
        with anyio.CancelScope() as scope:
            dispose = signal.add_listener(lambda _s: scope.cancel())
            try:
                result = await call(original, arguments)
            except (HarnessError, anyio.get_cancelled_exc_class()):
                raise
            except Exception as exc:
                raise McpToolError(
                    f'MCP tool "{original}" on upstream "{upstream}" failed: {exc}'
                ) from exc
            finally:
                dispose()
        if result is None:
            raise AbortError(reason_text(signal.reason))
        if result.is_error:
            message = _content_text(result.content) or f'MCP tool "{original}" failed'
            raise McpToolError(message)
        if result.structured_content is not None:
            value = result.structured_content
            if unwrap and isinstance(value, Mapping) and "result" in value:
                value = value["result"]
            return value
        return _content_text(result.content)

    execute.__qualname__ = f"{registered}.execute"
    return ToolDefinition(
        name=registered,
        description=_description(tool),
        parameters=parameters,
        output=ToolOutput(schema=output_schema, render=_render),
        execute=execute,
        is_concurrency_safe=(lambda _args: True) if safe else None,
        timeout_ms=timeout_ms,
    )


class ImportedTool(msgspec.Struct, frozen=True, kw_only=True):
    """One imported tool: where it came from and what was registered for it.

    ``native`` is the tool as the upstream listed it (``mcp.types.Tool``).
    """

    name: str
    upstream: str
    original_name: str
    definition: ToolDefinition
    native: Any


class ImportedTools:
    """The tools of every connected upstream (``connect_upstreams`` yields one).

    ``skipped`` holds the ``McpSchemaError`` of each tool left out under
    ``on_unsupported="skip"`` (its ``tool`` names it).
    """

    def __init__(
        self,
        tools: list[ImportedTool],
        clients: dict[str, Any],
        skipped: list[McpSchemaError] | None = None,
    ) -> None:
        self.tools = tools
        self.clients = clients
        self.skipped = list(skipped or [])

    @property
    def definitions(self) -> list[ToolDefinition]:
        """The raw definitions, in upstream order then listing order."""
        return [t.definition for t in self.tools]

    def register(self, target: Any) -> Callable[[], None]:
        """Register every definition on ``target`` (a ``ToolRuntime`` or ``Scope``);
        returns one disposer for all of them."""
        disposers: list[Callable[[], None]] = []
        try:
            for definition in self.definitions:
                disposers.append(target.register(definition))
        except BaseException:
            for dispose in reversed(disposers):
                dispose()
            raise

        def dispose_all() -> None:
            for dispose in reversed(disposers):
                dispose()

        return dispose_all


async def _list_all(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(1000):  # a paginator that never ends cannot hang the import
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def plan_names(
    listings: Sequence[tuple[str, Sequence[str]]],
    on_collision: Literal["mangle", "error"],
    reserved: Iterable[str] = (),
) -> list[list[str]]:
    """Registered names for ``[(upstream, [tool names])]``, in the same shape.

    ``reserved`` names (``run_code`` always, plus whatever the host registers beside the
    imported tools) collide with any upstream that lists them.
    """
    taken_by_host = {RESERVED_NAME, *reserved}
    seen_upstreams: set[str] = set()
    holders: dict[str, list[str]] = {}
    for upstream, names in listings:
        if upstream in seen_upstreams:
            raise McpImportError(f'two upstreams are both named "{upstream}"; name them apart')
        if MANGLE_SEPARATOR in upstream or not upstream:
            raise McpImportError(
                f'upstream name "{upstream}" must be non-empty and free of "{MANGLE_SEPARATOR}"'
            )
        seen_upstreams.add(upstream)
        for name in dict.fromkeys(names):
            holders.setdefault(name, []).append(upstream)
        if len(set(names)) != len(names):
            dup = next(n for n in names if list(names).count(n) > 1)
            raise McpImportError(f'upstream "{upstream}" lists tool "{dup}" twice')
    colliding = {
        name: ups for name, ups in holders.items() if len(ups) > 1 or name in taken_by_host
    }
    if colliding and on_collision == "error":
        name, ups = next(iter(colliding.items()))
        where = (
            f"upstreams {', '.join(repr(u) for u in ups)}"
            if len(ups) > 1
            else f"upstream {ups[0]!r} and is already taken by the host"
        )
        raise McpImportError(
            f'tool "{name}" is listed by {where}; '
            'pass on_collision="mangle" to register them as "<upstream>__<tool>"'
        )
    out: list[list[str]] = []
    taken = {name for name in holders if name not in colliding} | taken_by_host
    for upstream, names in listings:
        row = []
        for name in names:
            final = mangle(upstream, name) if name in colliding else name
            if name in colliding and final in taken:
                raise McpImportError(
                    f'tool "{name}" collides between upstreams and its mangled name "{final}" '
                    "is itself a tool name; rename an upstream"
                )
            row.append(final)
        taken.update(row)
        out.append(row)
    return out


@contextlib.asynccontextmanager
async def connect_upstreams(
    upstreams: Sequence[Upstream],
    *,
    on_collision: Literal["mangle", "error"] = "mangle",
    parallel: ParallelPolicy = "read-only",
    read_timeout_seconds: float | None = None,
    timeout_ms: float | None = None,
    reserved: Iterable[str] = (),
    on_unsupported: Literal["error", "skip"] = "error",
) -> AsyncIterator[ImportedTools]:
    """Connect to every upstream, list its tools and yield the ``ImportedTools``.

    ``timeout_ms`` is every imported tool's ``timeout_ms`` (a ``TimeoutPolicy`` on the
    runtime enforces it; None: unbounded). ``reserved``: names the host registers beside
    the imported tools (built-in tools, ``search_tools``, ...); an upstream tool of such a
    name collides with the host, so it is mangled (or refused with ``"error"``), as is
    one named ``run_code``. ``on_unsupported="skip"`` leaves out a tool whose input schema
    cannot be represented (its error is kept in ``skipped``) instead of raising.

    The connections stay open inside the block (the definitions call through them) and
    close, subprocesses included, when it exits. Raises ``McpImportError`` for a name
    collision that ``on_collision`` does not resolve and ``McpSchemaError`` for a tool
    whose input schema cannot be represented.
    """
    if parallel not in ("read-only", "all", "none"):
        raise ValueError(f'parallel must be "read-only", "all" or "none", not {parallel!r}')
    try:
        async with _connected(
            upstreams,
            on_collision,
            parallel,
            read_timeout_seconds,
            timeout_ms,
            frozenset(reserved),
            on_unsupported,
        ) as tools:
            yield tools
    except BaseExceptionGroup as group:
        # The SDK's clients run task groups, which wrap whatever crosses them (an import
        # error raised here, or the caller's own exception from the block): one error is
        # raised as itself.
        leaf = _single_leaf(group)
        if leaf is None:
            raise
        raise leaf from None


def _single_leaf(group: BaseExceptionGroup[Any]) -> BaseException | None:
    node: BaseException = group
    while isinstance(node, BaseExceptionGroup):
        if len(node.exceptions) != 1:
            return None
        node = node.exceptions[0]
    return node


@contextlib.asynccontextmanager
async def _connected(
    upstreams: Sequence[Upstream],
    on_collision: Literal["mangle", "error"],
    parallel: ParallelPolicy,
    read_timeout_seconds: float | None,
    timeout_ms: float | None,
    reserved: frozenset[str],
    on_unsupported: Literal["error", "skip"],
) -> AsyncIterator[ImportedTools]:
    from mcp import Client

    async with contextlib.AsyncExitStack() as stack:
        clients: dict[str, Any] = {}
        listed: dict[str, list[Any]] = {}

        async def open_one(upstream: Upstream) -> None:
            client = Client(
                upstream.target, read_timeout_seconds=read_timeout_seconds, mode="legacy"
            )
            clients[upstream.name] = await stack.enter_async_context(client)

        # Connect one by one: the exit stack is not task-safe, and a failing upstream
        # should be named. Listing then runs concurrently.
        for upstream in upstreams:
            try:
                await open_one(upstream)
            except Exception as exc:
                cause = _single_leaf(exc) if isinstance(exc, BaseExceptionGroup) else exc
                raise McpImportError(
                    f'cannot connect to upstream "{upstream.name}": {cause or exc}'
                ) from exc

        async def list_one(name: str) -> None:
            listed[name] = await _list_all(clients[name])

        async with anyio.create_task_group() as tg:
            for upstream in upstreams:
                tg.start_soon(list_one, upstream.name)

        order = [u.name for u in upstreams]
        names = plan_names(
            [(u, [t.name for t in listed[u]]) for u in order],
            on_collision=on_collision,
            reserved=reserved,
        )
        imported: list[ImportedTool] = []
        skipped: list[McpSchemaError] = []
        for upstream_name, registered_names in zip(order, names, strict=True):
            client = clients[upstream_name]
            for tool, registered in zip(listed[upstream_name], registered_names, strict=True):
                try:
                    definition = tool_definition(
                        tool,
                        client.call_tool,
                        name=registered,
                        upstream=upstream_name,
                        parallel=parallel,
                        timeout_ms=timeout_ms,
                    )
                except McpSchemaError as exc:
                    if on_unsupported == "error":
                        raise
                    skipped.append(exc)
                    continue
                imported.append(
                    ImportedTool(
                        name=registered,
                        upstream=upstream_name,
                        original_name=tool.name,
                        definition=definition,
                        native=tool,
                    )
                )
        yield ImportedTools(imported, clients, skipped)
