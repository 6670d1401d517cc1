"""Subagents over the real client and the loopback model server: foreground, background
jobs, continuable children with messages, reports, interrupts, forks and caps."""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode.agent import (
    CHILD_PROMPT,
    Agent,
    SubagentConfig,
    build_subagent_tools,
)
from codemode.engine import (
    AbortController,
    SqliteSessionLog,
    ToolExecutionInput,
)
from codemode.engine.json import thaw
from tests.agent.harness import Tree, agent_tree, call_args
from tests.agent.model_server import Call, Hold, ModelServer, Reply, Status

pytestmark = pytest.mark.anyio

_args = call_args


def _tree(
    server: ModelServer,
    tmp_path: Path,
    *,
    config: SubagentConfig | None = None,
    **options: Any,
) -> contextlib.AbstractAsyncContextManager[Tree]:
    return agent_tree(server, tmp_path, *build_subagent_tools(config), **options)


def _tools(request: Any) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "tool"]


async def test_foreground_subagent_returns_the_childs_final_text(tmp_path: Path) -> None:
    call = Call("s1", "subagent", _args(description="count lines", prompt="CHILD-A: count"))
    with ModelServer(
        [Reply(calls=[call]), Reply(text=["The child says 42."])],
        by_prompt={"CHILD-A": [Reply(text=["There are ", "42 lines."])]},
    ) as server:
        async with _tree(server, tmp_path) as tree:
            outcomes = await tree.agent.run("delegate the count")
    assert [o.reason for o in outcomes] == ["done"]
    [child_request] = server.requests_for("CHILD-A")
    assert child_request.messages[0]["content"].endswith(CHILD_PROMPT)
    assert child_request.messages[1] == {"role": "user", "content": "CHILD-A: count"}
    # The child does not see the parent's conversation.
    assert "delegate the count" not in json.dumps(child_request.messages)
    parent_final = server.requests_for("delegate the count")[-1]
    assert _tools(parent_final) == ["There are 42 lines."]
    # The child's own session file names its parent and workspace.
    [child_file] = [p for p in (tmp_path / "sessions").glob("ses-*.db")]
    info = next(e for e in SqliteSessionLog.read(child_file) if e["type"] == "agent/session")
    assert info["parentId"] == tree.agent.session_id
    assert info["workspace"] == str(tmp_path / "ws") and info["title"] == "count lines"


async def test_a_failed_child_is_an_error_with_its_diagnostic(tmp_path: Path) -> None:
    call = Call("s1", "subagent", _args(description="d", prompt="CHILD-F: go"))
    with ModelServer(
        [Reply(calls=[call]), Reply(text=["it failed"])],
        by_prompt={"CHILD-F": [Status(500, message="model overloaded")]},
    ) as server:
        async with _tree(server, tmp_path) as tree:
            await tree.agent.run("try it")
    [result] = _tools(server.requests_for("try it")[-1])
    assert result.startswith("Error: subagent run failed\nDiagnostic: ")
    assert "500" in result


async def test_interrupting_the_parent_cancels_the_foreground_child(tmp_path: Path) -> None:
    call = Call("s1", "subagent", _args(description="d", prompt="CHILD-H: think"))
    with ModelServer(
        [Reply(calls=[call])], by_prompt={"CHILD-H": [Hold(text=["half an answer"])]}
    ) as server:
        async with _tree(server, tmp_path) as tree:
            controller = AbortController()
            streamed = anyio.Event()

            def watch(child: Agent) -> None:
                # Stop once the child's first words have arrived (its partial output).
                child.on_event = lambda e: streamed.set() if e["type"] == "text" else None

            tree.service.children.on_child = watch
            async with anyio.create_task_group() as tg:

                async def stop() -> None:
                    await streamed.wait()
                    controller.abort("user pressed Ctrl-C")

                tg.start_soon(stop)
                outcomes = await tree.agent.run("go", signal=controller.signal)
            # The child's model stream was closed (the server's next write found no client).
            assert await anyio.to_thread.run_sync(server.dropped.wait, 30)
    assert outcomes[-1].reason == "interrupted"
    stored = SqliteSessionLog.read(tmp_path / "sessions" / "root.db")
    answer = [e for e in stored if e["type"] == "agent/message" and e["message"]["role"] == "tool"]
    assert answer[-1]["message"]["content"].startswith("Error: subagent run was cancelled")
    assert (
        "Partial output before the run ended:\nhalf an answer" in answer[-1]["message"]["content"]
    )


async def test_background_job_is_collected_with_job_output(tmp_path: Path) -> None:
    start = Call(
        "s1",
        "subagent",
        _args(description="survey", prompt="CHILD-B: survey", run_in_background=True),
    )
    collect = Call("j1", "job_output", _args(job_id="subagent-1", wait=True))
    with ModelServer(
        [Reply(calls=[start]), Reply(calls=[collect]), Reply(text=["collected"])],
        by_prompt={"CHILD-B": [Reply(text=["survey result: fine"])]},
    ) as server:
        async with _tree(server, tmp_path) as tree:
            await tree.agent.run("survey in the background")
    started, output = _tools(server.requests_for("survey in the background")[-1])
    assert started == "started background subagent job subagent-1"
    assert "survey result: fine" in output and "completed" in output


async def test_run_waits_for_a_background_job_and_hears_its_notice(tmp_path: Path) -> None:
    start = Call(
        "s1",
        "subagent",
        _args(description="survey", prompt="CHILD-W: survey", run_in_background=True),
    )
    # The child answers only once the parent's turn has ended (its first turn-end).
    parent_done = threading.Event()

    def late(body: dict[str, Any]) -> Reply:
        # In the server's handler thread; a guard against a hang, not a measurement.
        assert parent_done.wait(30)
        return Reply(text=["late result"])

    with ModelServer(
        [Reply(calls=[start]), Reply(text=["started"]), Reply(text=["heard it"])],
        by_prompt={"CHILD-W": [late]},
    ) as server:
        async with _tree(server, tmp_path) as tree:
            waited: list[list[str]] = []
            tree.service.on_wait = waited.append

            def on_event(event: Any) -> None:
                if event["type"] == "turn-end":
                    parent_done.set()

            tree.agent.on_event = on_event
            outcomes = await tree.agent.run("survey in the background")
    # The prompt's turn, then the turn the completion notice started.
    assert [(o.reason, o.origin) for o in outcomes] == [("done", "user"), ("done", "host")]
    assert waited == [["background subagent job subagent-1 (survey)"]]
    last = server.requests_for("survey in the background")[-1].messages
    assert last[-1]["content"] == (
        "background job subagent-1 (subagent: survey) finished [status: completed]. "
        "Read its output with job_output."
    )


async def test_continuable_child_messages_reports_and_listing(tmp_path: Path) -> None:
    config = SubagentConfig(background_mode="continuable")

    def child_id_from(body: dict[str, Any]) -> str:
        started = next(
            m["content"] for m in body["messages"] if m["role"] == "tool"
        )  # "started subagent ses-..."
        return str(started).rsplit(" ", 1)[-1]

    root_script: list[Any] = [
        Reply(calls=[Call("s1", "subagent", _args(description="helper", prompt="CHILD-C: a"))]),
        Reply(text=["started it"]),
        # The child's first turn ends: the root hears it (a continuation).
        Reply(calls=[Call("l1", "list_agents")]),
        lambda body: Reply(
            calls=[
                Call(
                    "m1",
                    "send_message",
                    _args(subagent_id=child_id_from(body), message="now b"),
                )
            ]
        ),
        Reply(text=["sent"]),
        # The report and the end of the child's second turn: one or two more turns,
        # depending on when each arrives.
        Reply(text=["got it"]),
        Reply(text=["got the rest"]),
    ]
    child_script = [
        Reply(text=["did a"]),
        Reply(calls=[Call("r1", "report", _args(output="b is half done"))]),
        Reply(text=["did b"]),
    ]
    with ModelServer(root_script, by_prompt={"CHILD-C": child_script}) as server:
        async with _tree(server, tmp_path, config=config) as tree:
            outcomes = await tree.agent.run("start a helper")
            child_id = next(iter(tree.service._entries))
    started = _tools(server.requests_for("start a helper")[1])
    assert started == [f"started subagent {child_id}"]
    assert outcomes[0].origin == "user" and {o.origin for o in outcomes[1:]} == {"host"}
    root_requests = server.requests_for("start a helper")
    heard = root_requests[2].messages[-1]["content"]
    assert heard.startswith(f"[subagent {child_id} (helper) finished its turn: completed]\ndid a")
    listing = _tools(root_requests[3])[-1]
    assert listing == f"{child_id} [idle] — helper"
    assert _tools(root_requests[4])[-1] == (
        f"message queued as the next turn for subagent {child_id}"
    )
    final = root_requests[-1].messages
    texts = [m["content"] for m in final if m["role"] == "user"]
    assert len(root_requests) in (6, 7)
    assert any(
        t.startswith(f"[report from subagent {child_id} (helper), message msg-") for t in texts
    )
    assert any("b is half done" in t for t in texts)
    assert any("did b" in t for t in texts)
    child_requests = server.requests_for("CHILD-C")
    assert child_requests[1].messages[-1] == {"role": "user", "content": "now b"}
    reported = _tools(child_requests[2])[-1]
    assert reported.startswith("report accepted by the agent that started you as message msg-")


def _run_tool(agent: Agent, name: str, args: dict[str, Any]) -> Any:
    return agent.runtime.execute(
        ToolExecutionInput(
            call_id=f"t-{name}",
            name=name,
            arguments=args,
            signal=AbortController().signal,
            agent=agent.scope,
        )
    )


async def test_descendants_interrupts_and_direct_child_rules(tmp_path: Path) -> None:
    config = SubagentConfig(background_mode="continuable")
    with ModelServer(
        [],
        by_prompt={
            "CHILD-1": [
                Reply(
                    calls=[Call("g", "subagent", _args(description="grandchild", prompt="CHILD-2"))]
                ),
                Reply(text=["started my own"]),
                # Told that the grandchild's turn ended (interrupted).
                Reply(text=["noted"]),
            ],
            "CHILD-2": [Hold(text=["thinking"])],
        },
    ) as server:
        async with _tree(server, tmp_path, config=config, wait=False) as tree:
            root = tree.agent
            started = await _run_tool(
                root, "subagent", {"description": "child", "prompt": "CHILD-1"}
            )
            child_id = thaw(started.value)["subagentId"]
            await anyio.to_thread.run_sync(server.holding.wait, 30)
            grandchild_id = next(i for i in tree.service._entries if i != child_id)
            with anyio.fail_after(20):
                # The child's turn ends after it started the grandchild.
                while tree.service._entries[child_id].status == "running":
                    await tree.service.wait_arrival()
            listing = await _run_tool(root, "list_agents", {"scope": "descendants"})
            assert thaw(listing.value) == [
                {
                    "kind": "child",
                    "id": child_id,
                    "label": "child",
                    "status": "idle",
                    "parent": root.session_id,
                    "depth": 1,
                },
                {
                    "kind": "child",
                    "id": grandchild_id,
                    "label": "grandchild",
                    "status": "running",
                    "parent": child_id,
                    "depth": 2,
                },
            ]
            children = await _run_tool(root, "list_agents", {})
            assert [i["id"] for i in thaw(children.value)] == [child_id]
            deep = await _run_tool(
                root, "send_message", {"subagent_id": grandchild_id, "message": "hi"}
            )
            assert deep.is_error and deep.error.info.code == "SUBAGENT_NOT_DIRECT_CHILD"
            unknown = await _run_tool(root, "interrupt_agent", {"agent_id": "ses-nope"})
            assert unknown.is_error and unknown.error.message == "unknown agent ses-nope"
            stop = await _run_tool(root, "interrupt_agent", {"agent_id": grandchild_id})
            assert not stop.is_error and thaw(stop.value) == {"accepted": True}
            assert stop.content[0]["text"] == f"interrupt requested for agent {grandchild_id}"
            with anyio.fail_after(20):
                while tree.service._entries[grandchild_id].status == "running":
                    await tree.service.wait_arrival()
            again = await _run_tool(root, "interrupt_agent", {"agent_id": grandchild_id})
            assert not again.is_error  # finished: an accepted no-op
            report = await _run_tool(root, "report", {"output": "x"})
            assert report.is_error and report.error.message == (
                "report is only available inside a continuable subagent"
            )


async def test_fork_starts_from_the_parents_conversation(tmp_path: Path) -> None:
    fork = Call("f1", "subagent_fork", _args(description="try b", prompt="now try plan B"))
    # The fork's first user message is the parent's, and the parent waits for it: one
    # script in request order.
    script = [
        Reply(text=["plan A failed"]),
        Reply(calls=[fork]),
        Reply(text=["plan B works"]),  # the forked child
        Reply(text=["the fork says plan B works"]),
    ]
    with ModelServer(script) as server:
        async with _tree(server, tmp_path) as tree:
            await tree.agent.run_turn("try plan A")
            await tree.agent.run_turn("fork it")
    child = server.requests[2]
    assert child.messages[0]["content"].endswith(CHILD_PROMPT)
    contents = [(m["role"], m.get("content")) for m in child.messages[1:]]
    assert contents == [
        ("user", "try plan A"),
        ("assistant", "plan A failed"),
        ("user", "fork it"),
        ("user", "now try plan B"),
    ]
    assert _tools(server.requests[3]) == ["plan B works"]


async def test_depth_cap_and_no_agent(tmp_path: Path) -> None:
    call = Call("s1", "subagent", _args(description="d", prompt="CHILD-D: nest"))
    nested = Call("s2", "subagent", _args(description="deeper", prompt="CHILD-E: nest"))
    with ModelServer(
        [Reply(calls=[call]), Reply(text=["done"])],
        by_prompt={"CHILD-D": [Reply(calls=[nested]), Reply(text=["could not nest"])]},
    ) as server:
        async with _tree(server, tmp_path, max_depth=1) as tree:
            await tree.agent.run("nest")
            rt = tree.agent.runtime
            lonely = await rt.execute(
                ToolExecutionInput(
                    call_id="x", name="list_agents", arguments={}, signal=AbortController().signal
                )
            )
    [refused] = _tools(server.requests_for("CHILD-D")[-1])
    assert refused == (
        "Error: subagents may nest at most 1 level deep; this agent is already at depth 1"
    )
    assert lonely.is_error and lonely.error.message == (
        "list_agents requires a calling agent (exec.agent was undefined)"
    )


def test_config_changes_name_description_and_parameters() -> None:
    plain, fork, *_ = build_subagent_tools()
    assert "run_in_background" in plain.parameters["properties"]
    assert plain.description.endswith("collect with `job_output` and stop with `job_kill`.")
    assert fork.name == "subagent_fork" and "copy of everything said so far" in fork.description
    [quiet, *_] = build_subagent_tools(SubagentConfig(enable_run_in_background=False), fork=False)
    assert "run_in_background" not in quiet.parameters["properties"]
    assert "job_output" not in quiet.description
    [cont, *_] = build_subagent_tools(SubagentConfig(background_mode="continuable"), fork=False)
    assert "send_message" in cont.description


async def test_guards_and_restrictions_of_the_parent_apply_to_its_children(
    tmp_path: Path,
) -> None:
    call = Call("s1", "subagent", _args(description="d", prompt="CHILD-G: write"))
    write = Call("w1", "write", _args(file_path="x.txt", content="x"))
    with ModelServer(
        [Reply(calls=[call]), Reply(text=["done"])],
        by_prompt={"CHILD-G": [Reply(calls=[write]), Reply(text=["could not write"])]},
    ) as server:
        async with _tree(server, tmp_path) as tree:
            tree.agent.scope.guard(
                lambda exec_: "writes are off for this session" if exec_.name == "write" else None
            )
            await tree.agent.run("delegate a write")
    [refused] = _tools(server.requests_for("CHILD-G")[-1])
    assert "writes are off for this session" in refused
    assert not (tmp_path / "ws" / "x.txt").exists()
