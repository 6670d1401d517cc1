"""``codemode serve-mcp``: a code-mode MCP server in front of upstream MCP servers.

The command connects to every ``--upstream`` (a command line started as an stdio
subprocess, or an ``http(s)://`` streamable-HTTP URL), imports their tools into a
``ToolRuntime`` (``codemode.integrations.mcp``), optionally adds the built-in tools bound
to ``--workspace``, and serves ``run_code`` (plus every tool in ``--mode both``) over
stdio, or over streamable HTTP at ``http://HOST:PORT/mcp`` with ``--http``.

In stdio mode stdout is the protocol: the real stdin/stdout are moved to private
descriptors before anything starts (fd 0 then reads the null device and fd 1 writes to
stderr), so a sandbox, an upstream or a library that prints cannot corrupt the wire.

Concurrency: a program's sub-calls overlap up to ``--max-parallel`` (32 here, above the
engine's default 10: upstream calls wait on another process, not on this one's CPU).
``--parallel all``
(the default here) treats every upstream tool as parallel-safe: the upstream server
already accepts concurrent requests from any MCP client, and a program only overlaps
calls it starts together (``asyncio.gather`` / ``Promise.all``); ``--parallel
read-only`` runs only tools marked ``readOnlyHint`` concurrently (others alone, in
submission order), ``--parallel none`` runs every sub-call alone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path
from typing import Annotated, Any

import anyio
import msgspec
import typer

__all__ = ["serve_mcp_command"]


def _parse_http(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"--http expects HOST:PORT (for example 127.0.0.1:8765), got {value!r}")
    return host.strip("[]"), int(port)


def _parse_env(values: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--env expects KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def _upstreams(specs: list[str], env: dict[str, str]) -> list[Any]:
    from codemode.integrations.mcp import Upstream

    upstreams = []
    used: dict[str, int] = {}
    for spec in specs:
        # ``name=command ...`` names an upstream explicitly (the prefix of mangled names).
        name: str | None = None
        head, sep, rest = spec.partition("=")
        if sep and head.isidentifier() and "__" not in head and rest.strip():
            name, spec = head, rest
        if spec.startswith(("http://", "https://")):
            upstream = Upstream.http(spec.strip(), name=name)
        else:
            upstream = Upstream.stdio(spec, name=name, env={**os.environ, **env})
        count = used.get(upstream.name, 0) + 1
        used[upstream.name] = count
        if count > 1:
            # Two upstreams from the same script: number the later ones, deterministically.
            upstream = msgspec.structs.replace(upstream, name=f"{upstream.name}_{count}")
        upstreams.append(upstream)
    return upstreams


@contextlib.contextmanager
def _private_stdio() -> Any:
    """Move the real stdin/stdout to private descriptors; yield them as text files."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    stdin = open(wire_in, encoding="utf-8", errors="replace", closefd=True)
    stdout = open(wire_out, "w", encoding="utf-8", closefd=True)
    try:
        yield stdin, stdout
    finally:
        stdin.close()
        stdout.close()


async def _serve(
    *,
    upstreams: list[Any],
    language: str,
    mode: str,
    workspace: Path,
    builtin_tools: bool,
    http: tuple[str, int] | None,
    sdk_budget: int,
    max_parallel: int,
    parallel: str,
    on_collision: str,
    wire: Any,
    limits: Any,
    tool_timeout_ms: int | None,
) -> None:
    from codemode.engine import ToolRuntime
    from codemode.engine.policies import TimeoutPolicy
    from codemode.integrations.mcp import (
        DISCOVERY_TOOL_NAMES,
        CodeModeServer,
        connect_upstreams,
    )

    from ._compose import install_builtin_tools, make_state_dir

    async with contextlib.AsyncExitStack() as stack:
        import codemode.sandbox as sandbox

        code_runtime = (
            sandbox.TypeScriptRuntime(limits=limits)
            if language == "typescript"
            else sandbox.PythonRuntime(limits=limits)
        )
        code_runtime = await stack.enter_async_context(code_runtime)
        runtime = ToolRuntime(
            mode=mode, code_runtime=code_runtime, max_parallel_sub_calls=max_parallel
        )
        TimeoutPolicy().install(runtime)
        if builtin_tools:
            state_dir = make_state_dir(workspace, "codemode-mcp-")
            stack.callback(shutil.rmtree, state_dir, ignore_errors=True)
            # stdin is the MCP channel (or nobody's terminal): no question provider here.
            # The model reads only tool descriptions, so the skills list goes into skill's.
            await install_builtin_tools(
                stack,
                runtime,
                workspace,
                state_dir,
                interactive=False,
                skills_in_description=True,
            )
        imported = await stack.enter_async_context(
            connect_upstreams(
                upstreams,
                parallel=parallel,  # type: ignore[arg-type]
                on_collision=on_collision,  # type: ignore[arg-type]
                timeout_ms=tool_timeout_ms,
                # Names the host registers itself: an upstream tool named like one of them
                # is mangled rather than failing registration.
                reserved=[*(t.name for t in runtime.sdk_tools()), *DISCOVERY_TOOL_NAMES],
                # One tool with an unrepresentable schema must not keep the rest out.
                on_unsupported="skip",
            )
        )
        for problem in imported.skipped:
            sys.stderr.write(f"codemode serve-mcp: skipped: {problem}\n")
        stack.callback(imported.register(runtime))
        # No session log: a long-lived server would keep every run's events in memory.
        agent = runtime.scope("mcp")
        server = CodeModeServer(runtime, agent=agent, sdk_budget=sdk_budget)
        stack.callback(server.close)
        sys.stderr.write(
            f"codemode serve-mcp: {len(imported.tools)} tools from {len(upstreams)} upstream(s), "
            f"{language}, mode {mode}"
            + (", compact catalog (search_tools/describe_tool)" if server.compact else "")
            + "\n"
        )
        if http is None:
            stdin, stdout = wire
            await server.serve_stdio(stdin=anyio.wrap_file(stdin), stdout=anyio.wrap_file(stdout))
        else:
            host, port = http

            def ready(bound: int) -> None:
                shown = f"[{host}]" if ":" in host else host
                sys.stderr.write(f"codemode serve-mcp: listening on http://{shown}:{bound}/mcp\n")
                sys.stderr.flush()

            await server.serve_http(host, port, on_ready=ready)


def serve_mcp_command(
    upstream: Annotated[
        list[str],
        typer.Option(
            "--upstream",
            "-u",
            help='An upstream MCP server: a command line ("npx -y server-x", run as an '
            "stdio subprocess) or an http(s):// URL; NAME=... names it. Repeatable.",
        ),
    ],
    lang: Annotated[
        str, typer.Option("--lang", "-l", help="Program language: python or typescript.")
    ] = "python",
    mode: Annotated[
        str,
        typer.Option(
            "--mode", help="code: list run_code only; both: also list every tool natively."
        ),
    ] = "code",
    workspace: Annotated[
        Path,
        typer.Option("--workspace", "-w", help="Directory the built-in tools are bound to."),
    ] = Path("."),
    builtin_tools: Annotated[
        bool,
        typer.Option(
            "--builtin-tools", help="Also offer the built-in file, search and bash tools."
        ),
    ] = False,
    http: Annotated[
        str | None,
        typer.Option("--http", help="Serve streamable HTTP at http://HOST:PORT/mcp, not stdio."),
    ] = None,
    sdk_budget: Annotated[
        int,
        typer.Option(
            "--sdk-budget",
            min=0,
            help="Most SDK characters in run_code's description; past it a compact index "
            "and search_tools/describe_tool.",
        ),
    ] = 40_000,
    max_parallel: Annotated[
        int,
        typer.Option("--max-parallel", min=1, help="Most sub-calls of one program at once."),
    ] = 32,
    parallel: Annotated[
        str,
        typer.Option(
            "--parallel",
            help="Which upstream tools may overlap: all, read-only (readOnlyHint) or none.",
        ),
    ] = "all",
    on_collision: Annotated[
        str,
        typer.Option(
            "--on-collision",
            help="Same tool name on two upstreams: mangle (<upstream>__<tool>) or error.",
        ),
    ] = "mangle",
    compute_ms: Annotated[
        int, typer.Option("--compute-ms", min=1, help="CPU budget of one program.")
    ] = 10_000,
    wall_ms: Annotated[
        int, typer.Option("--wall-ms", min=1, help="Wall-clock ceiling of one program.")
    ] = 60_000,
    tool_timeout_ms: Annotated[
        int | None,
        typer.Option(
            "--tool-timeout-ms",
            min=1,
            help="Time limit of each upstream tool call (default: none).",
        ),
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env",
            help="KEY=VALUE added to the upstream subprocesses' environment (which is "
            "otherwise this process's). Repeatable.",
        ),
    ] = None,
) -> None:
    """Serve code mode over MCP in front of upstream MCP servers."""
    from ._app import _check_workspace, _run_async, _usage
    from ._compose import CLI_LIMITS, LANGUAGE_ALIASES

    try:
        import mcp  # noqa: F401
    except ImportError:
        raise _usage("serve-mcp needs the mcp extra: pip install 'codemode[mcp]'") from None
    if lang not in LANGUAGE_ALIASES:
        raise _usage(f"unknown language {lang!r} (choose from: {', '.join(LANGUAGE_ALIASES)})")
    if mode not in ("code", "both"):
        raise _usage(f"unknown mode {mode!r} (choose from: code, both)")
    if parallel not in ("all", "read-only", "none"):
        raise _usage(f"unknown --parallel {parallel!r} (choose from: all, read-only, none)")
    if on_collision not in ("mangle", "error"):
        raise _usage(f"unknown --on-collision {on_collision!r} (choose from: mangle, error)")
    if not upstream:
        raise _usage("serve-mcp needs at least one --upstream")
    ws = _check_workspace(workspace)
    try:
        address = None if http is None else _parse_http(http)
        extra_env = _parse_env(env or [])
        upstreams = _upstreams(upstream, extra_env)
    except ValueError as exc:
        raise _usage(str(exc)) from None

    with contextlib.ExitStack() as stack:
        wire = stack.enter_context(_private_stdio()) if address is None else None

        async def work() -> None:
            await _serve(
                upstreams=upstreams,
                language=LANGUAGE_ALIASES[lang],
                mode=mode,
                workspace=ws,
                builtin_tools=builtin_tools,
                http=address,
                sdk_budget=sdk_budget,
                max_parallel=max_parallel,
                parallel=parallel,
                on_collision=on_collision,
                wire=wire,
                # A server runs many programs, some at once: two warm workers.
                limits=msgspec.structs.replace(
                    CLI_LIMITS, pool_size=2, max_compute_ms=compute_ms, max_wall_ms=wall_ms
                ),
                tool_timeout_ms=tool_timeout_ms,
            )

        try:
            _run_async(work)
        except Exception as caught:
            from codemode.engine import HarnessError

            leaf: BaseException = caught
            while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
                leaf = leaf.exceptions[0]
            if isinstance(leaf, (HarnessError, ValueError, OSError)):
                # A startup failure (an upstream that will not start, a collision, an
                # unrepresentable schema): one line, no traceback.
                sys.stderr.write(f"codemode serve-mcp: {leaf}\n")
                raise typer.Exit(1) from None
            raise
