"""One agent tree for the delegating tools' tests (subagents, ralph, workflow).

``agent_tree(server, tmp_path, *tools)`` yields a ``Tree``: a root ``Agent`` over a native
``ToolRuntime`` holding the default tools bound to ``tmp_path/"ws"`` plus ``tools``,
talking to the loopback model ``server`` through the real model client, its session in
``tmp_path/"sessions"/"root.db"``, with the subagent service entered (children's
sessions in the same folder, background jobs in a ``JobManager``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from codemode.agent import (
    Agent,
    AgentEvent,
    ModelClient,
    ModelConfig,
    RetryPolicy,
    Subagents,
    enable_subagents,
    new_session_info,
)
from codemode.engine import SqliteSessionLog, ToolDefinition, ToolRuntime
from codemode.tools import JobManager, default_tools
from tests.agent.model_server import ModelServer

FAST = RetryPolicy(max_retries=0, base_delay=0.001, max_delay=0.01)


def call_args(**values: Any) -> list[str]:
    """A scripted tool call's arguments: ``values`` as one JSON piece."""
    return [json.dumps(values)]


def tool_text(server: ModelServer, marker: str) -> str:
    """The last tool message the conversation that began with ``marker`` sent the model."""
    messages = server.requests_for(marker)[-1].messages
    return str([m for m in messages if m["role"] == "tool"][-1]["content"])


class Tree:
    """The root agent, its subagent service, its session log and folder, and the events
    the root emitted (``events``)."""

    def __init__(
        self,
        agent: Agent,
        service: Subagents,
        log: SqliteSessionLog,
        folder: Path,
        events: list[AgentEvent],
    ) -> None:
        self.agent = agent
        self.service = service
        self.log = log
        self.folder = folder
        self.events = events


@contextlib.asynccontextmanager
async def agent_tree(
    server: ModelServer,
    tmp_path: Path,
    *tools: ToolDefinition,
    wait: bool = True,
    max_depth: int = 3,
    max_steps: int = 6,
    resume: bool = False,
) -> AsyncIterator[Tree]:
    """The tree described in the module docstring; ``wait``: the root's continuation
    waits for running continuable descendants; ``resume``: continue ``root.db``."""
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    folder = tmp_path / "sessions"
    folder.mkdir(exist_ok=True)
    events: list[AgentEvent] = []
    async with JobManager(output_dir=tmp_path / "jobs") as jobs:
        rt = ToolRuntime(mode="native")
        for tool in (*default_tools(ws, jobs=jobs, output_dir=tmp_path / "out"), *tools):
            rt.register(tool)
        with SqliteSessionLog(folder / "root.db") as log:
            async with ModelClient(
                ModelConfig(server.base_url, "scripted", retry=FAST), api_key="k"
            ) as client:
                agent = Agent(
                    rt,
                    rt.scope("agent", session=log),
                    client,
                    max_steps=max_steps,
                    on_event=events.append,
                    session=new_session_info(workspace=str(ws)),
                )
                if resume:
                    agent.resume()
                service = enable_subagents(
                    agent,
                    session_dir=folder,
                    jobs=jobs,
                    wait_for_children=wait,
                    max_depth=max_depth,
                )
                async with service:
                    yield Tree(agent, service, log, folder, events)
