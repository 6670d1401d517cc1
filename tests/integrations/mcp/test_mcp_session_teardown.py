"""serve-mcp's per-session built-in tools, in process: nothing of a session outlives it.

Each session registers its own tool instances on its scope; once it ends, neither its
scope nor its tools may stay reachable (a long-running server opens thousands). The
registry caches each scope's view under a weak key, and the cached view holds the
session's tools, whose read-before-write policy holds the scope: without the teardown's
fresh lookup the key never dies (measured: ~156 KiB per session).
"""

from __future__ import annotations

import contextlib
import gc
from pathlib import Path

import pytest
from mcp import Client

import codemode.sandbox as sb
from codemode.cli._compose import install_builtin_tools, make_state_dir
from codemode.cli._serve_sessions import SessionTools
from codemode.engine import Scope, ToolDefinition, ToolRuntime
from codemode.engine.policies import TimeoutPolicy
from codemode.integrations.mcp import CodeModeServer

pytestmark = pytest.mark.anyio

WRITE = "await tools.write({'file_path': 'a.txt', 'content': 'x'})\nreturn 1"


async def test_no_scope_or_tool_of_an_ended_session_stays_reachable(tmp_path: Path) -> None:
    workspace, root = tmp_path / "ws", tmp_path / "sessions"
    workspace.mkdir()
    root.mkdir()
    async with contextlib.AsyncExitStack() as stack:
        code = await stack.enter_async_context(sb.PythonRuntime(limits=sb.Limits(pool_size=1)))
        runtime = ToolRuntime(mode="code", code_runtime=code)
        TimeoutPolicy().install(runtime)
        state = make_state_dir(workspace, "teardown-test-")
        await install_builtin_tools(
            stack, runtime, workspace, state, interactive=False, skills_in_description=True
        )
        agent = runtime.scope("mcp")
        server = CodeModeServer(
            runtime,
            agent=agent,
            session_scope=SessionTools(
                runtime, agent, workspace=workspace, builtin_tools=True, workspace_root=root
            ),
        )
        gc.collect()  # what earlier tests left is collected before the count, not during
        template_bash = sum(
            1 for o in gc.get_objects() if isinstance(o, ToolDefinition) and o.name == "bash"
        )
        async with server._serving():
            for _ in range(5):
                async with Client(server.lowlevel_server(), mode="legacy") as client:
                    result = await client.call_tool("run_code", {"code": WRITE})
                    assert not result.is_error
                    assert len(server.sessions()) == 1
            assert server.sessions() == {}
            gc.collect()
            # Only this server's session scopes (``mcp-<key>``): scopes other tests of the
            # same process left to the collector are not this test's business.
            sessions = [
                o for o in gc.get_objects() if isinstance(o, Scope) and o.name.startswith("mcp-")
            ]
            bash = [
                o for o in gc.get_objects() if isinstance(o, ToolDefinition) and o.name == "bash"
            ]
            assert sessions == []
            assert len(bash) == template_bash
            assert list(root.iterdir()) == []
