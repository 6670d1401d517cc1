"""``codemode serve-mcp``: a code-mode MCP server in front of upstream MCP servers.

The command connects to every ``--upstream`` (a command line started as an stdio
subprocess, or an ``http(s)://`` streamable-HTTP URL), imports their tools into a
``ToolRuntime`` (``codemode.integrations.mcp``), optionally adds the built-in tools bound
to ``--workspace`` (or, with ``--workspace-per-session DIR``, to a private directory per
MCP session), and serves ``run_code`` (plus every tool in ``--mode both``) over stdio, or
over streamable HTTP at ``http(s)://HOST:PORT/mcp`` with ``--http``. Every MCP session
runs as its own scope with its own built-in tools (``_serve_sessions``).

Over HTTP the server is a remote code runner: a bind that is not loopback refuses to
start without authentication (``--auth-token-env``, ``--auth-token-generate``,
``--auth-verifier``) unless ``--insecure-no-auth`` says so (warned on every start), and
a wildcard bind needs the ``--allowed-host`` names clients use. Limits: sessions, body
size, idle expiry, concurrent programs per session.

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
    http_options: Any,
    max_runs_per_session: int,
    max_runs: int,
    workspace_root: Path | None,
    keep_workspaces: bool,
    notices: list[str],
) -> None:
    from codemode.engine import ToolRuntime
    from codemode.engine.policies import TimeoutPolicy
    from codemode.integrations.mcp import (
        DISCOVERY_TOOL_NAMES,
        CodeModeServer,
        connect_upstreams,
    )

    from ._compose import install_builtin_tools, make_state_dir
    from ._serve_sessions import SessionTools

    def log(line: str) -> None:
        sys.stderr.write(f"codemode serve-mcp: {line}\n")
        sys.stderr.flush()

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
            # The template registration: what the catalog lists and the SDK declares.
            # Each MCP session registers its own instances over it (``SessionTools``).
            await install_builtin_tools(
                stack,
                runtime,
                workspace,
                state_dir,
                interactive=False,
                skills_in_description=True,
            )
            if workspace_root is not None:
                # Relative paths resolve against each session's own directory.
                runtime.sdk_facts.pop("workspace", None)
        builtin_names = [t.name for t in runtime.sdk_tools()]
        imported = await stack.enter_async_context(
            connect_upstreams(
                upstreams,
                parallel=parallel,  # type: ignore[arg-type]
                on_collision=on_collision,  # type: ignore[arg-type]
                timeout_ms=tool_timeout_ms,
                # Names the host registers itself: an upstream tool named like one of them
                # is mangled rather than failing registration.
                reserved=[*builtin_names, *DISCOVERY_TOOL_NAMES],
                # One tool with an unrepresentable schema must not keep the rest out.
                on_unsupported="skip",
            )
        )
        for problem in imported.skipped:
            sys.stderr.write(f"codemode serve-mcp: skipped: {problem}\n")
        stack.callback(imported.register(runtime))
        # No session log: a long-lived server would keep every run's events in memory.
        agent = runtime.scope("mcp")
        sessions = SessionTools(
            runtime,
            agent,
            workspace=workspace,
            builtin_tools=builtin_tools,
            workspace_root=workspace_root,
            keep=keep_workspaces,
            log=log,
        )
        server = CodeModeServer(
            runtime,
            agent=agent,
            sdk_budget=sdk_budget,
            session_scope=sessions,
            max_runs_per_session=max_runs_per_session,
            max_runs=max_runs,
            log=log,
        )
        stack.callback(server.close)

        def count(n: int, noun: str) -> str:
            return f"{n} {noun}" + ("" if n == 1 else "s")

        served = (
            [f"{count(len(imported.tools), 'tool')} from {count(len(upstreams), 'upstream')}"]
            if upstreams
            else []
        )
        if builtin_tools:
            served.append(f"{count(len(builtin_names), 'built-in tool')}")
        log(
            " + ".join(served)
            + f", {language}, mode {mode}"
            + (", compact catalog (search_tools/describe_tool)" if server.compact else "")
        )
        for notice in notices:
            log(notice)
        if http is None:
            stdin, stdout = wire
            await server.serve_stdio(stdin=anyio.wrap_file(stdin), stdout=anyio.wrap_file(stdout))
        else:
            host, port = http
            scheme = "https" if http_options.tls_cert else "http"

            def ready(bound: int) -> None:
                shown = f"[{host}]" if ":" in host else host
                log(f"listening on {scheme}://{shown}:{bound}/mcp")

            await server.serve_http(host, port, options=http_options, on_ready=ready)


_BUILTIN_HELP = (
    "Also offer the built-in tools, bound to --workspace: files (read, write, edit, "
    "str_replace_editor, glob, grep), bash with background jobs (job_list/output/kill), "
    "terminals, lsp, todo_write, skill, web_fetch and web_search. They run with this "
    "process's authority (bash is not sandboxed)."
)


def _load_verifier(spec: str) -> Any:
    """``MODULE:NAME``: a ``TokenVerifier`` object, or a callable returning one."""
    import importlib

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"--auth-verifier expects MODULE:NAME, got {spec!r}")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"--auth-verifier {spec!r}: {exc}") from None
    if not hasattr(target, "verify_token") and callable(target):
        target = target()
    if not callable(getattr(target, "verify_token", None)):
        raise ValueError(f"--auth-verifier {spec!r} is not a TokenVerifier (no verify_token)")
    return target


def _http_security(
    address: tuple[str, int] | None,
    *,
    token_env: str | None,
    token_generate: bool,
    verifier: str | None,
    issuer_url: str | None,
    resource_url: str | None,
    scopes: list[str],
    insecure_no_auth: bool,
    allowed_hosts: list[str],
    allowed_origins: list[str],
    tls_cert: Path | None,
    tls_key: Path | None,
    limits: dict[str, Any],
    notices: list[str],
) -> Any:
    """The ``HttpOptions`` of the flags (``ValueError``: a usage error)."""
    from codemode.integrations.mcp import HttpOptions, StaticTokenVerifier, is_loopback

    http_only = {
        "--auth-token-env": token_env is not None,
        "--auth-token-generate": token_generate,
        "--auth-verifier": verifier is not None,
        "--insecure-no-auth": insecure_no_auth,
        "--allowed-host": bool(allowed_hosts),
        "--allowed-origin": bool(allowed_origins),
        "--tls-cert": tls_cert is not None,
        "--tls-key": tls_key is not None,
    }
    if address is None:
        given = [flag for flag, on in http_only.items() if on]
        if given:
            raise ValueError(f"{given[0]} applies to --http only (stdio has no network side)")
        return None
    host, port = address
    chosen = [
        flag
        for flag in ("--auth-token-env", "--auth-token-generate", "--auth-verifier")
        if http_only[flag]
    ]
    if len(chosen) > 1:
        raise ValueError(f"choose one of {' and '.join(chosen)}")
    if chosen and insecure_no_auth:
        raise ValueError(f"--insecure-no-auth contradicts {chosen[0]}")
    if (issuer_url is None) != (resource_url is None):
        raise ValueError("--auth-issuer-url and --auth-resource-url go together")
    if (issuer_url is not None or scopes) and verifier is None:
        raise ValueError(
            "--auth-issuer-url, --auth-resource-url and --auth-scope need --auth-verifier"
        )
    token_verifier: Any = None
    if token_env is not None:
        token = os.environ.get(token_env, "")
        if not token:
            raise ValueError(f"--auth-token-env {token_env}: the variable is unset or empty")
        if len(token) < 16:
            raise ValueError(
                f"--auth-token-env {token_env}: the token is {len(token)} characters; "
                "use at least 16 (e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
            )
        token_verifier = StaticTokenVerifier(token)
    elif token_generate:
        import secrets

        token = secrets.token_urlsafe(32)
        token_verifier = StaticTokenVerifier(token)
        # Printed once, before anything else can fail: the only place it is ever shown.
        sys.stderr.write(
            f"codemode serve-mcp: bearer token (shown once; clients send "
            f"'Authorization: Bearer <token>'): {token}\n"
        )
        sys.stderr.flush()
    elif verifier is not None:
        token_verifier = _load_verifier(verifier)
    loopback = is_loopback(host)
    if token_verifier is None and not loopback:
        if not insecure_no_auth:
            raise ValueError(
                f"--http {host}:{port} is reachable from other machines and anyone reaching "
                "it could run programs: give --auth-token-env NAME, --auth-token-generate or "
                "--auth-verifier MODULE:NAME (or --insecure-no-auth to serve without "
                "authentication)"
            )
    if insecure_no_auth:
        notices.append(
            f"WARNING: serving {host}:{port} without authentication (--insecure-no-auth): "
            "whoever reaches this port can run programs and call every tool"
        )
    if not loopback and not allowed_hosts:
        if host in ("0.0.0.0", "::", ""):
            raise ValueError(
                f"--http {host}:{port} accepts any address: name the hosts clients reach it "
                "by with --allowed-host NAME[:PORT] (repeatable), so a rebound DNS name "
                "is refused"
            )
        allowed_hosts = [f"[{host}]" if ":" in host else host]
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("--tls-cert and --tls-key go together")
    for flag, path in (("--tls-cert", tls_cert), ("--tls-key", tls_key)):
        if path is not None and not path.is_file():
            raise ValueError(f"{flag} {str(path)!r} is not a file")
    return HttpOptions(
        allowed_hosts=tuple(allowed_hosts),
        allowed_origins=tuple(allowed_origins),
        token_verifier=token_verifier,
        issuer_url=issuer_url,
        resource_url=resource_url,
        required_scopes=tuple(scopes),
        tls_cert=None if tls_cert is None else str(tls_cert),
        tls_key=None if tls_key is None else str(tls_key),
        **limits,
    )


def serve_mcp_command(
    upstream: Annotated[
        list[str] | None,
        typer.Option(
            "--upstream",
            "-u",
            help='An upstream MCP server: a command line ("npx -y server-x", run as an '
            "stdio subprocess) or an http(s):// URL; NAME=... names it. Repeatable; none "
            "with --builtin-tools serves the built-in tools alone.",
        ),
    ] = None,
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
    builtin_tools: Annotated[bool, typer.Option("--builtin-tools", help=_BUILTIN_HELP)] = False,
    workspace_per_session: Annotated[
        Path | None,
        typer.Option(
            "--workspace-per-session",
            help="Bind each MCP session's built-in tools to its own new directory under "
            "DIR (removed when the session ends), not to --workspace.",
        ),
    ] = None,
    keep_session_workspaces: Annotated[
        bool,
        typer.Option(
            "--keep-session-workspaces",
            help="Keep each session's directory under --workspace-per-session when it ends.",
        ),
    ] = False,
    http: Annotated[
        str | None,
        typer.Option("--http", help="Serve streamable HTTP at http://HOST:PORT/mcp, not stdio."),
    ] = None,
    auth_token_env: Annotated[
        str | None,
        typer.Option(
            "--auth-token-env",
            help="HTTP: require 'Authorization: Bearer <token>', the token read from this "
            "environment variable (at least 16 characters).",
        ),
    ] = None,
    auth_token_generate: Annotated[
        bool,
        typer.Option(
            "--auth-token-generate",
            help="HTTP: require a bearer token generated now and printed once to stderr.",
        ),
    ] = False,
    auth_verifier: Annotated[
        str | None,
        typer.Option(
            "--auth-verifier",
            help="HTTP: MODULE:NAME of an mcp TokenVerifier (or a factory of one) that "
            "checks bearer tokens, e.g. against your authorization server.",
        ),
    ] = None,
    auth_issuer_url: Annotated[
        str | None,
        typer.Option(
            "--auth-issuer-url",
            help="HTTP with --auth-verifier: the authorization server that issues tokens, "
            "published in the protected-resource metadata.",
        ),
    ] = None,
    auth_resource_url: Annotated[
        str | None,
        typer.Option(
            "--auth-resource-url",
            help="HTTP with --auth-verifier: this server's public URL (.../mcp); tokens "
            "must be issued for it; publishes /.well-known/oauth-protected-resource/mcp.",
        ),
    ] = None,
    auth_scope: Annotated[
        list[str] | None,
        typer.Option("--auth-scope", help="HTTP: a scope every token must carry. Repeatable."),
    ] = None,
    insecure_no_auth: Annotated[
        bool,
        typer.Option(
            "--insecure-no-auth",
            help="HTTP: serve a non-loopback address without authentication (warned at "
            "every start).",
        ),
    ] = False,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="HTTP: a Host header value to accept (NAME or NAME:PORT); others get 421. "
            "Repeatable; loopback names are always accepted on a loopback bind.",
        ),
    ] = None,
    allowed_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-origin",
            help="HTTP: an Origin to accept (https://NAME[:PORT]); others get 403. Repeatable.",
        ),
    ] = None,
    tls_cert: Annotated[
        Path | None,
        typer.Option("--tls-cert", help="HTTP: serve HTTPS with this PEM certificate (chain)."),
    ] = None,
    tls_key: Annotated[
        Path | None,
        typer.Option("--tls-key", help="HTTP: the PEM private key of --tls-cert."),
    ] = None,
    max_sessions: Annotated[
        int,
        typer.Option("--max-sessions", min=1, help="HTTP: most MCP sessions open at once."),
    ] = 100,
    max_body_mb: Annotated[
        float,
        typer.Option("--max-body-mb", min=0.001, help="HTTP: largest request body, in MiB."),
    ] = 4.0,
    session_idle_s: Annotated[
        float,
        typer.Option(
            "--session-idle-s",
            min=0.1,
            help="HTTP: end a session after this many seconds without a request.",
        ),
    ] = 1800.0,
    max_runs_per_session: Annotated[
        int,
        typer.Option(
            "--max-runs-per-session",
            min=1,
            help="Most run_code calls one MCP session has running at once.",
        ),
    ] = 4,
    max_runs: Annotated[
        int,
        typer.Option(
            "--max-runs",
            min=1,
            help="Most run_code calls running at once on the whole server.",
        ),
    ] = 32,
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
    """Serve code mode over MCP: upstream MCP servers' tools and/or the built-in tools."""
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
    if not upstream and not builtin_tools:
        raise _usage(
            "serve-mcp has nothing to serve: give at least one --upstream, or --builtin-tools"
        )
    ws = _check_workspace(workspace)
    workspace_root: Path | None = None
    if workspace_per_session is not None:
        if not builtin_tools:
            raise _usage("--workspace-per-session binds the built-in tools: add --builtin-tools")
        if not workspace_per_session.is_dir():
            raise _usage(
                f"--workspace-per-session {str(workspace_per_session)!r} is not a directory"
            )
        workspace_root = _check_workspace(workspace_per_session.resolve())
    elif keep_session_workspaces:
        raise _usage("--keep-session-workspaces needs --workspace-per-session DIR")
    notices: list[str] = []
    try:
        address = None if http is None else _parse_http(http)
        extra_env = _parse_env(env or [])
        upstreams = _upstreams(upstream or [], extra_env)
        http_options = _http_security(
            address,
            token_env=auth_token_env,
            token_generate=auth_token_generate,
            verifier=auth_verifier,
            issuer_url=auth_issuer_url,
            resource_url=auth_resource_url,
            scopes=auth_scope or [],
            insecure_no_auth=insecure_no_auth,
            allowed_hosts=allowed_host or [],
            allowed_origins=allowed_origin or [],
            tls_cert=tls_cert,
            tls_key=tls_key,
            limits={
                "max_sessions": max_sessions,
                "max_body_bytes": max(1, int(max_body_mb * 2**20)),
                "session_idle_s": session_idle_s,
            },
            notices=notices,
        )
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
                http_options=http_options,
                max_runs_per_session=max_runs_per_session,
                max_runs=max_runs,
                workspace_root=workspace_root,
                keep_workspaces=keep_session_workspaces,
                notices=notices,
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
