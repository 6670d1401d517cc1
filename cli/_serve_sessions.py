"""``codemode serve-mcp``'s per-session scope: each MCP session gets its own built-in tools.

The engine keys jobs, terminals, todos, plan mode and read-before-write observations by
scope, and serve-mcp goes further: every MCP session's scope carries its own instances
of the built-in tools (a ``JobManager``, a ``TerminalManager``, language servers, an
``FsObservationPolicy``, a spill store), registered on the scope so they shadow the
catalog's template tools. Whatever a session starts therefore dies with it, and nothing
it leaves in a manager outlives it in a long-running server.

With ``workspace_root`` (``--workspace-per-session DIR``) the file tools are bound to a
fresh private directory ``DIR/<session id>`` (0700), removed when the session ends
unless ``keep``; a session that replaced that directory with a symlink gets only the
link removed (``shutil.rmtree`` refuses links and never follows them below).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from codemode.engine import Scope, ToolRuntime

__all__ = ["SessionTools"]


class SessionTools:
    """The ``session_scope`` factory serve-mcp hands to ``CodeModeServer``.

    ``parent`` is the server's agent scope; ``builtin_tools`` whether sessions get the
    built-in tools at all (without them a session is a plain child scope).
    """

    def __init__(
        self,
        runtime: ToolRuntime,
        parent: Scope,
        *,
        workspace: Path,
        builtin_tools: bool,
        workspace_root: Path | None = None,
        keep: bool = False,
        log: Callable[[str], None] = lambda _line: None,
    ) -> None:
        self.runtime = runtime
        self.parent = parent
        self.workspace = workspace
        self.builtin_tools = builtin_tools
        self.workspace_root = workspace_root
        self.keep = keep
        self.log = log

    def workspace_of(self, key: str) -> Path:
        """Where session ``key``'s files live."""
        if self.workspace_root is None:
            return self.workspace
        return self.workspace_root / key

    @contextlib.asynccontextmanager
    async def __call__(self, key: str) -> AsyncIterator[Scope]:
        from codemode.integrations.mcp import RecentEventsLog

        if not key.isalnum():
            # SDK session ids are hex; anything else must never become a path.
            raise ValueError(f"refusing an MCP session id that is not alphanumeric: {key!r}")
        async with contextlib.AsyncExitStack() as stack:
            session_log = RecentEventsLog()
            stack.callback(session_log.close)
            scope = self.runtime.scope(f"mcp-{key[:12]}", parent=self.parent, session=session_log)
            # Runs last, once the session's tools are unregistered: the registry caches
            # each scope's view under a weak key, but the cached view holds the session's
            # tools, whose FsObservationPolicy holds the scope, so the key never dies (156
            # KiB per session). Looking the view up again replaces it with one that no
            # longer holds them.
            stack.callback(self.runtime.get, "run_code", scope)
            if self.builtin_tools:
                workspace = self.workspace
                if self.workspace_root is not None:
                    workspace = self.workspace_of(key)
                    os.mkdir(workspace, 0o700)
                    if not self.keep:
                        # Pushed first, so it runs last: after the session's jobs and
                        # terminals, which may still be writing there, are dead.
                        stack.callback(self._remove_workspace, workspace)
                await self._install(stack, scope, workspace)
            yield scope

    def _remove_workspace(self, workspace: Path) -> None:
        if workspace.is_symlink():
            # The session swapped its directory for a link: remove the link, not its target.
            workspace.unlink()
            self.log(f"session workspace {workspace} was a symlink; removed the link only")
            return
        shutil.rmtree(workspace, ignore_errors=True)

    async def _install(
        self, stack: contextlib.AsyncExitStack, scope: Scope, workspace: Path
    ) -> None:
        import codemode.tools as first_party
        from codemode.engine.policies import LocalSpillStore
        from codemode.tools.lsp import LspManager
        from codemode.tools.skills import SkillCatalog
        from codemode.tools.terminal import TerminalManager
        from codemode.tools.web import WebConfig

        from ._compose import bash_env_from, make_state_dir

        state_dir = make_state_dir(workspace, "codemode-mcp-session-")
        stack.callback(shutil.rmtree, state_dir, ignore_errors=True)
        jobs = await stack.enter_async_context(
            first_party.JobManager(output_dir=state_dir / "jobs")
        )
        fs_policy = first_party.FsObservationPolicy()
        stack.callback(fs_policy.install(self.runtime))
        lsp = await stack.enter_async_context(LspManager())
        terminals = await stack.enter_async_context(
            TerminalManager(work_dir=state_dir / "terminals")
        )
        # The same catalog the template registration (``install_builtin_tools``) lists,
        # so a session's tools shadow every template tool and the SDK stays the same.
        for definition in first_party.default_tools(
            workspace,
            fs_policy=fs_policy,
            jobs=jobs,
            spill_store=LocalSpillStore(state_dir / "spill"),
            output_dir=state_dir / "output",
            questions=None,
            skills=SkillCatalog([workspace / ".codemode" / "skills"]),
            skills_in_description=True,
            web=WebConfig.from_env(os.environ),
            lsp=lsp,
            terminals=terminals,
            bash_env=bash_env_from(os.environ),
        ):
            stack.callback(scope.register(definition))
