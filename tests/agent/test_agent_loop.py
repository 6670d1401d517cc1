"""The agent loop over the real model client and a scripted loopback model server."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode.agent import (
    BASE_PROMPT,
    Agent,
    AgentEvent,
    ModelClient,
    ModelConfig,
    ModelError,
    RetryPolicy,
    TurnOutcome,
)
from codemode.engine import (
    AbortController,
    SqliteSessionLog,
    ToolOutput,
    ToolRuntime,
    define_tool,
    text,
)
from codemode.sandbox import Limits, PythonRuntime
from codemode.tools import default_tools
from tests.agent.model_server import Call, Hold, ModelServer, Reply, Status

pytestmark = pytest.mark.anyio

LIMITS = Limits(max_compute_ms=10_000, max_wall_ms=30_000, pool_size=1)
FAST = RetryPolicy(max_retries=3, base_delay=0.001, max_delay=0.01)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    return ws


def _extra_tools(log: list[str], started: anyio.Event) -> list[Any]:
    async def boom(args: Any, ctx: Any) -> Any:
        raise RuntimeError("the disk is on fire")

    async def finish(args: Any, ctx: Any) -> Any:
        ctx.defer_context({"role": "user", "content": [text("reminder: tests still pending")]})
        ctx.conclude_turn()
        return "finished"

    async def slow(args: Any, ctx: Any) -> Any:
        log.append("slow-start")
        started.set()
        await ctx.signal.wait()
        log.append("slow-aborted")
        return "stopped"

    output = ToolOutput(schema={"type": "string"}, render=lambda args, value: [text(value)])
    return [
        define_tool(
            name="boom", description="Always fails.", parameters={}, output=output, execute=boom
        ),
        define_tool(
            name="finish",
            description="Ends the turn.",
            parameters={},
            output=output,
            execute=finish,
        ),
        define_tool(
            name="slow", description="Waits for abort.", parameters={}, output=output, execute=slow
        ),
    ]


class Host:
    """A runtime with the default tools (plus test tools), a session file and events."""

    def __init__(self, runtime: ToolRuntime, session: Path, server: ModelServer) -> None:
        self.runtime = runtime
        self.session_path = session
        self.server = server
        self.events: list[AgentEvent] = []
        self.tool_log: list[str] = []
        self.slow_started = anyio.Event()
        for tool in _extra_tools(self.tool_log, self.slow_started):
            runtime.register(tool)

    @contextlib.asynccontextmanager
    async def agent(self, *, max_steps: int = 10, resume: bool = False) -> AsyncIterator[Agent]:
        with SqliteSessionLog(self.session_path) as log:
            async with ModelClient(
                ModelConfig(self.server.base_url, "scripted", retry=FAST), api_key="sk-test-secret"
            ) as client:
                agent = Agent(
                    self.runtime,
                    self.runtime.scope("agent", session=log),
                    client,
                    max_steps=max_steps,
                    on_event=self.events.append,
                )
                if resume:
                    agent.resume()
                yield agent


async def _run(host: Host, prompt: str, **kw: Any) -> tuple[TurnOutcome, Agent]:
    async with host.agent(**kw) as agent:
        outcome = await agent.run_turn(prompt)
    return outcome, agent


def _native(workspace: Path, tmp_path: Path) -> ToolRuntime:
    rt = ToolRuntime(mode="native")
    for tool in default_tools(workspace, output_dir=tmp_path / "out"):
        rt.register(tool)
    return rt


def _tool_messages(request: Any) -> list[dict[str, Any]]:
    return [m for m in request.messages if m["role"] == "tool"]


async def test_native_multi_step_reads_and_writes(workspace: Path, tmp_path: Path) -> None:
    script = [
        Reply(calls=[Call("c1", "read", ['{"file_path": "notes', '.txt"}'])]),
        Reply(
            text=["Writing."],
            calls=[Call("c2", "write", ['{"file_path": "out.txt", ', '"content": "ALPHA\\n"}'])],
        ),
        Reply(text=["Done: ", "wrote out.txt."]),
    ]
    with ModelServer(script) as server:
        host = Host(_native(workspace, tmp_path), tmp_path / "s.db", server)
        outcome, agent = await _run(host, "uppercase the first line")
    assert outcome.reason == "done" and outcome.ok
    assert outcome.text == "Done: wrote out.txt."
    assert outcome.steps == 3
    assert outcome.usage.total_tokens == 45 and outcome.usage.requests == 3
    assert (workspace / "out.txt").read_text() == "ALPHA\n"
    first, second, third = server.requests
    assert first.body["stream"] is True
    assert first.body["stream_options"] == {"include_usage": True}
    assert first.headers["authorization"] == "Bearer sk-test-secret"
    names = {t["function"]["name"] for t in first.body["tools"]}
    assert {"read", "write", "edit", "bash", "boom"} <= names and "run_code" not in names
    assert first.messages[0] == {"role": "system", "content": BASE_PROMPT}
    assert first.messages[1] == {"role": "user", "content": "uppercase the first line"}
    read_result = _tool_messages(second)[0]
    assert read_result["tool_call_id"] == "c1" and "alpha" in read_result["content"]
    assert third.messages[-2]["tool_calls"][0]["function"]["arguments"] == (
        '{"file_path": "out.txt", "content": "ALPHA\\n"}'
    )
    # Everything is in the session file: engine tool events and the agent's messages.
    events = SqliteSessionLog.read(tmp_path / "s.db")
    kinds = [e["type"] for e in events]
    assert kinds.count("tool/call") == 2 and kinds.count("tool/result") == 2
    assert kinds.count("agent/message") == 6  # user, assistant, tool, assistant, tool, assistant
    assert kinds[:2] == ["agent/session", "agent/turn-start"] and kinds[-1] == "agent/turn-end"
    assert events[-1]["usage"]["totalTokens"] == 45
    assert "sk-test-secret" not in json.dumps([dict(e) for e in map(_plain, events)])
    assert [e["delta"] for e in host.events if e["type"] == "text"] == [
        "Writing.",
        "Done: ",
        "wrote out.txt.",
    ]
    assert agent.client.usage.requests == 3


def _plain(event: Any) -> Any:
    from codemode.engine.json import thaw

    return thaw(event)


async def test_streamed_parallel_calls_are_assembled_by_index(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / "b.txt").write_text("bravo\n", encoding="utf-8")
    script = [
        Reply(
            calls=[
                Call("r1", "read", ['{"file_pa', 'th": "no', 'tes.txt"}']),
                Call("r2", "read", ['{"file_path"', ': "b.txt"}']),
            ]
        ),
        Reply(text=["both read"]),
    ]
    with ModelServer(script) as server:
        host = Host(_native(workspace, tmp_path), tmp_path / "s.db", server)
        outcome, _ = await _run(host, "read both")
    assert outcome.reason == "done"
    sent = server.requests[1].messages
    assistant = next(m for m in sent if m["role"] == "assistant")
    assert [c["id"] for c in assistant["tool_calls"]] == ["r1", "r2"]
    assert [c["function"]["arguments"] for c in assistant["tool_calls"]] == [
        '{"file_path": "notes.txt"}',
        '{"file_path": "b.txt"}',
    ]
    tools = _tool_messages(server.requests[1])
    assert [t["tool_call_id"] for t in tools] == ["r1", "r2"]
    assert "alpha" in tools[0]["content"] and "bravo" in tools[1]["content"]


async def test_failing_tool_and_bad_arguments_reach_the_model_as_errors(
    workspace: Path, tmp_path: Path
) -> None:
    script = [
        Reply(calls=[Call("f1", "boom"), Call("f2", "read", ['{"nope": 1}']), Call("f3", "ghost")]),
        Reply(text=["it failed"]),
    ]
    with ModelServer(script) as server:
        host = Host(_native(workspace, tmp_path), tmp_path / "s.db", server)
        outcome, _ = await _run(host, "try")
    assert outcome.reason == "done"
    contents = [t["content"] for t in _tool_messages(server.requests[1])]
    assert contents[0].startswith("Error: ") and "the disk is on fire" in contents[0]
    assert contents[1].startswith("Error: ")
    assert contents[2].startswith("Error: ") and "ghost" in contents[2]
    results = [e for e in host.events if e["type"] == "tool-result"]
    assert [r["isError"] for r in results] == [True, True, True]


async def test_arguments_that_are_not_json_say_where_and_the_turn_carries_on(
    workspace: Path, tmp_path: Path
) -> None:
    script = [
        Reply(
            calls=[
                # Two pieces: the parser's position spans the streamed deltas.
                Call("b1", "read", ['{"file_path":"notes.txt" ', '"limit": 5}']),
                Call("b2", "glob", ['{"pattern": NaN}']),
                # A JSON string is JSON: the schema's own complaint stands.
                Call("b3", "glob", ['"*.md"']),
            ]
        ),
        Reply(calls=[Call("g1", "read", ['{"file_path": "notes.txt", "limit": 5}'])]),
        Reply(text=["read it"]),
    ]
    with ModelServer(script) as server:
        host = Host(_native(workspace, tmp_path), tmp_path / "s.db", server)
        outcome, _ = await _run(host, "read notes")
    assert outcome.reason == "done" and outcome.steps == 3
    first, second, third = (t["content"] for t in _tool_messages(server.requests[1]))
    assert first == (
        "Error: arguments are not valid JSON: Expecting ',' delimiter at line 1 column 26: "
        '{"file_path":"notes.txt" "limit":…'
    )
    assert second == (
        'Error: arguments are not valid JSON: NaN is not valid JSON: {"pattern": NaN}'
    )
    assert third == 'Error: invalid arguments: "arguments" must be an object'
    # The corrected call ran: the conversation went on.
    assert "alpha" in _tool_messages(server.requests[2])[-1]["content"]
    # The pipeline saw the calls (audit events) and coded them INVALID_ARGS.
    from codemode.engine.json import thaw

    stored = [thaw(e) for e in SqliteSessionLog.read(tmp_path / "s.db")]
    failed = [e for e in stored if e["type"] == "tool/result" and e["callId"] in ("b1", "b2")]
    assert [e["error"]["code"] for e in failed] == ["INVALID_ARGS", "INVALID_ARGS"]


def test_invalid_json_excerpts_are_bounded_and_one_line() -> None:
    from codemode.agent._arguments import invalid_json_message

    assert invalid_json_message("") is None and invalid_json_message('{"a": [1]}') is None
    long = '{"content": "' + "x" * 500 + '\n"'
    message = invalid_json_message(long)
    assert message is not None
    assert message.startswith("arguments are not valid JSON: Invalid control character at")
    excerpt = message.rsplit(": ", 1)[1]
    assert excerpt.startswith("…") and excerpt.endswith('\\n"') and "\n" not in excerpt
    assert len(excerpt) <= 62
    deep = "[" * 100_000
    assert str(invalid_json_message(deep)).startswith("arguments are not valid JSON: ")


async def test_code_mode_runs_a_python_program(workspace: Path, tmp_path: Path) -> None:
    program = (
        "seen = await tools.read({'file_path': 'notes.txt'})\n"
        "await tools.write({'file_path': 'kind.txt', 'content': type(seen).__name__})\n"
        "return 'ok'\n"
    )
    script = [
        Reply(
            calls=[
                Call(
                    "p1", "run_code", [json.dumps({"code": program, "description": "count lines"})]
                )
            ]
        ),
        Reply(text=["counted"]),
    ]
    async with PythonRuntime(LIMITS) as code:
        rt = ToolRuntime(mode="code", code_runtime=code)
        for tool in default_tools(workspace, output_dir=tmp_path / "out"):
            rt.register(tool)
        with ModelServer(script) as server:
            host = Host(rt, tmp_path / "s.db", server)
            outcome, _ = await _run(host, "count lines")
    assert outcome.reason == "done", outcome
    first = server.requests[0]
    assert [t["function"]["name"] for t in first.body["tools"]] == ["run_code"]
    sections = rt.system_prompt_sections()
    assert sections["tools:code-only"] and "read" in sections["tools:sdk"]
    assert first.messages[0]["content"] == "\n\n".join(
        [BASE_PROMPT, sections["tools:code-only"], sections["tools:sdk"]]
    )
    result = _tool_messages(server.requests[1])[0]["content"]
    assert "Error" not in result, result
    assert (workspace / "kind.txt").read_text() == "dict"  # the read value, canonical
    kinds = [e["type"] for e in SqliteSessionLog.read(tmp_path / "s.db")]
    assert "tool/code-dispatch" in kinds


async def test_both_mode_offers_native_tools_and_run_code(workspace: Path, tmp_path: Path) -> None:
    script = [
        Reply(calls=[Call("n1", "read", ['{"file_path": "notes.txt"}'])]),
        Reply(
            calls=[
                Call(
                    "n2",
                    "run_code",
                    [json.dumps({"code": "return 6 * 7", "description": "multiply"})],
                )
            ]
        ),
        Reply(text=["42"]),
    ]
    async with PythonRuntime(LIMITS) as code:
        rt = ToolRuntime(mode="both", code_runtime=code)
        for tool in default_tools(workspace, output_dir=tmp_path / "out"):
            rt.register(tool)
        with ModelServer(script) as server:
            host = Host(rt, tmp_path / "s.db", server)
            outcome, _ = await _run(host, "mix")
    assert outcome.reason == "done"
    names = [t["function"]["name"] for t in server.requests[0].body["tools"]]
    assert "run_code" in names and "read" in names
    assert "42" in _tool_messages(server.requests[2])[-1]["content"]


async def test_concluded_turn_and_deferred_context(workspace: Path, tmp_path: Path) -> None:
    script = [Reply(text=["wrapping up"], calls=[Call("z1", "finish")]), Reply(text=["next"])]
    with ModelServer(script) as server:
        host = Host(_native(workspace, tmp_path), tmp_path / "s.db", server)
        async with host.agent() as agent:
            outcome = await agent.run_turn("finish up")
            assert outcome.reason == "concluded" and outcome.steps == 1
            assert len(server.requests) == 1  # the turn ended without asking the model again
            second = await agent.run_turn("and then?")
    assert second.reason == "done"
    sent = server.requests[1].messages
    roles = [m["role"] for m in sent]
    assert roles == ["system", "user", "assistant", "tool", "user", "user"]
    assert sent[3]["content"] == "finished"
    assert sent[4]["content"] == "reminder: tests still pending"
    assert sent[5]["content"] == "and then?"


async def test_step_limit_ends_the_turn_with_a_note(workspace: Path, tmp_path: Path) -> None:
    script = [
        Reply(calls=[Call(f"s{i}", "read", ['{"file_path": "notes.txt"}'])]) for i in range(3)
    ]
    with ModelServer(script) as server:
        host = Host(_native(workspace, tmp_path), tmp_path / "s.db", server)
        outcome, _ = await _run(host, "loop forever", max_steps=2)
    assert outcome.reason == "max_steps" and not outcome.ok
    assert outcome.note is not None and "step limit" in outcome.note
    assert len(server.requests) == 2
    end = SqliteSessionLog.read(tmp_path / "s.db")[-1]
    assert end["type"] == "agent/turn-end" and end["reason"] == "max_steps"


async def test_retry_on_429_then_success(workspace: Path, tmp_path: Path) -> None:
    script = [Status(429, retry_after="0"), Status(503), Reply(text=["fine"])]
    with ModelServer(script) as server:
        host = Host(_native(workspace, tmp_path), tmp_path / "s.db", server)
        outcome, _ = await _run(host, "hi")
    assert outcome.reason == "done" and outcome.text == "fine"
    assert len(server.requests) == 3


async def test_gives_up_after_the_retries(workspace: Path, tmp_path: Path) -> None:
    script = [Status(500) for _ in range(10)]
    with ModelServer(script) as server:
        host = Host(_native(workspace, tmp_path), tmp_path / "s.db", server)
        outcome, _ = await _run(host, "hi")
    assert outcome.reason == "error"
    assert (
        outcome.note is not None
        and "after 3 retries" in outcome.note
        and "HTTP 500" in outcome.note
    )
    assert len(server.requests) == 4  # the first attempt and FAST's 3 retries


async def test_bad_key_is_not_retried_and_is_named(workspace: Path, tmp_path: Path) -> None:
    with ModelServer([Status(401, message="invalid api key")]) as server:
        async with ModelClient(
            ModelConfig(server.base_url, "m", retry=FAST), api_key="sk-wrong", key_source="$MY_KEY"
        ) as client:
            with pytest.raises(ModelError) as caught:
                await client.complete([], [])
    assert caught.value.code == "MODEL_AUTH"
    assert "$MY_KEY" in str(caught.value) and "sk-wrong" not in str(caught.value)
    assert "sk-wrong" not in repr(client) and len(server.requests) == 1


async def test_unreachable_server(tmp_path: Path) -> None:
    # A port nothing listens on: bind, note the port, close.
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with ModelClient(
        ModelConfig(f"http://127.0.0.1:{port}/v1", "m", retry=FAST), api_key="k"
    ) as client:
        with pytest.raises(ModelError) as caught:
            await client.complete([], [])
    assert caught.value.code == "MODEL_UNREACHABLE"
    assert f"127.0.0.1:{port}" in str(caught.value)


async def test_abort_mid_stream_keeps_the_session(workspace: Path, tmp_path: Path) -> None:
    script = [Hold(text=["thinking..."]), Reply(text=["resumed"])]
    with ModelServer(script) as server:
        host = Host(_native(workspace, tmp_path), tmp_path / "s.db", server)
        async with host.agent() as agent:
            controller = AbortController()
            # The abort comes once the agent has the streamed text, not merely once the
            # server wrote it (on a loaded machine the client may not have read it yet).
            streamed = anyio.Event()
            previous = agent.on_event

            def on_event(event: Any) -> None:
                if event.get("type") == "text":
                    streamed.set()
                if previous is not None:
                    previous(event)

            agent.on_event = on_event
            async with anyio.create_task_group() as tg:

                async def stop_when_held() -> None:
                    await anyio.to_thread.run_sync(server.holding.wait)
                    await streamed.wait()
                    controller.abort("user interrupt")

                tg.start_soon(stop_when_held)
                outcome = await agent.run_turn("think", signal=controller.signal)
            # The abort closed the HTTP response: the server's next write found no client.
            await anyio.to_thread.run_sync(server.dropped.wait)
            again = await agent.run_turn("go on")
    assert outcome.reason == "interrupted" and outcome.text == "thinking..."
    assert again.reason == "done"
    roles = [(m["role"], m.get("content")) for m in server.requests[1].messages[1:]]
    assert roles == [("user", "think"), ("assistant", "thinking..."), ("user", "go on")]


async def test_abort_during_a_tool_call_answers_every_call(workspace: Path, tmp_path: Path) -> None:
    script = [Reply(calls=[Call("w1", "slow"), Call("w2", "read", ['{"file_path": "notes.txt"}'])])]
    script.append(Reply(text=["ok"]))
    with ModelServer(script) as server:
        host = Host(_native(workspace, tmp_path), tmp_path / "s.db", server)
        async with host.agent() as agent:
            controller = AbortController()

            async with anyio.create_task_group() as tg:

                async def stop_when_started() -> None:
                    await host.slow_started.wait()
                    controller.abort("user interrupt")

                tg.start_soon(stop_when_started)
                outcome = await agent.run_turn("wait", signal=controller.signal)
            again = await agent.run_turn("next")
    assert outcome.reason == "interrupted"
    assert host.tool_log == ["slow-start", "slow-aborted"]
    tools = _tool_messages(server.requests[1])
    assert [t["tool_call_id"] for t in tools] == ["w1", "w2"]
    assert tools[1]["content"].startswith("Error: ")  # never started: aborted before dispatch
    assert again.reason == "done"


async def test_resume_rebuilds_the_conversation(workspace: Path, tmp_path: Path) -> None:
    script = [
        Reply(calls=[Call("a1", "read", ['{"file_path": "notes.txt"}'])]),
        Reply(text=["first answer"]),
        Reply(text=["second answer"]),
    ]
    with ModelServer(script) as server:
        host = Host(_native(workspace, tmp_path), tmp_path / "s.db", server)
        await _run(host, "first")
        outcome, _agent = await _run(host, "second", resume=True)
    assert outcome.turn == 2
    sent = server.requests[2].messages
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[1]["content"] == "first" and sent[4]["content"] == "first answer"
    assert sent[5]["content"] == "second"


async def test_retry_after_is_waited_instead_of_the_backoff() -> None:
    # The backoff alone would wait up to 1000 s; the server's Retry-After says 0.
    slow = RetryPolicy(max_retries=1, base_delay=1000.0, max_delay=1000.0)
    with ModelServer([Status(429, retry_after="0"), Reply(text=["ok"])]) as server:
        async with ModelClient(
            ModelConfig(server.base_url, "m", retry=slow), api_key="k"
        ) as client:
            reply = await client.complete([], [])
    assert reply.message.content == "ok" and len(server.requests) == 2
    assert client.usage.requests == 1 and client.usage.total_tokens == 15


def test_backoff_is_bounded_and_jittered() -> None:
    policy = RetryPolicy(max_retries=5, base_delay=0.5, max_delay=3.0)
    assert policy.delay(1, 2.5) == 2.5
    assert policy.delay(1, 99.0) == 3.0 and policy.delay(1, -4.0) == 0.0
    for attempt, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 3.0), (9, 3.0)]:
        draws = [policy.delay(attempt, None) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in draws)
        assert len(set(draws)) > 1  # jitter: not one fixed delay


async def test_an_echoed_key_is_scrubbed_from_errors() -> None:
    with ModelServer([Status(400, message="bad request from key sk-echo-me")]) as server:
        async with ModelClient(ModelConfig(server.base_url, "m"), api_key="sk-echo-me") as client:
            with pytest.raises(ModelError) as caught:
                await client.complete([], [])
    assert caught.value.code == "MODEL_HTTP"
    assert "sk-echo-me" not in str(caught.value) and "***" in str(caught.value)


async def test_session_usage_counts_resumed_turns(workspace: Path, tmp_path: Path) -> None:
    with ModelServer([Reply(text=["a"]), Reply(text=["b"], usage=(100, 1))]) as server:
        host = Host(_native(workspace, tmp_path), tmp_path / "s.db", server)
        await _run(host, "one")
        _, agent = await _run(host, "two", resume=True)
    assert agent.session_usage.total_tokens == 15 + 101 and agent.session_usage.requests == 2
    assert host.events[-1]["sessionUsage"]["totalTokens"] == 116


async def test_cancelling_the_task_closes_the_stream_and_records_the_turn(
    workspace: Path, tmp_path: Path
) -> None:
    with ModelServer([Hold(text=["partial"])]) as server:
        host = Host(_native(workspace, tmp_path), tmp_path / "s.db", server)
        async with host.agent() as agent, anyio.create_task_group() as tg:

            async def cancel_when_held() -> None:
                await anyio.to_thread.run_sync(server.holding.wait)
                tg.cancel_scope.cancel()

            tg.start_soon(cancel_when_held)
            await agent.run_turn("think")
        await anyio.to_thread.run_sync(server.dropped.wait)
    end = SqliteSessionLog.read(tmp_path / "s.db")[-1]
    assert end["type"] == "agent/turn-end" and end["reason"] == "interrupted"


async def test_turn_hooks_and_injected_messages(workspace: Path, tmp_path: Path) -> None:
    seen: list[str] = []

    async def hook(agent: Agent, outcome: TurnOutcome) -> None:
        seen.append(outcome.reason)
        if len(seen) == 1:
            agent.inject("[schedule] time to check the build")

    with ModelServer([Reply(text=["first"]), Reply(text=["checked"])]) as server:
        host = Host(_native(workspace, tmp_path), tmp_path / "s.db", server)
        async with host.agent() as agent:
            agent.turn_hooks.append(hook)
            await agent.run_turn("hello")
            outcome = await agent.run_turn(None)
    assert seen == ["done", "done"] and outcome.text == "checked"
    sent = server.requests[1].messages
    assert sent[-1] == {"role": "user", "content": "[schedule] time to check the build"}
    stored = [e for e in SqliteSessionLog.read(tmp_path / "s.db") if e["type"] == "agent/message"]
    assert stored[-2]["message"]["context"] is True
    assert [
        e["prompt"]
        for e in SqliteSessionLog.read(tmp_path / "s.db")
        if e["type"] == "agent/turn-start"
    ] == ["hello", None]


def test_a_whole_turn_runs_without_openai(workspace: Path, tmp_path: Path) -> None:
    """The client is our own: with ``openai`` unimportable a turn streams a tool call and
    an answer, and neither the SDK nor pydantic is ever loaded."""
    import subprocess
    import sys

    script = [
        Reply(calls=[Call("r1", "read", ['{"file_path": "notes.txt"}'])]),
        Reply(text=["read ", "it"]),
    ]
    probe = (
        "import sys; sys.modules['openai'] = None\n"
        "import anyio\n"
        "from pathlib import Path\n"
        "from codemode.agent import Agent, ModelClient, ModelConfig\n"
        "from codemode.engine import SqliteSessionLog, ToolRuntime\n"
        "from codemode.tools import default_tools\n"
        "async def main(url, ws, out, db):\n"
        "    rt = ToolRuntime(mode='native')\n"
        "    for tool in default_tools(Path(ws), output_dir=Path(out)):\n"
        "        rt.register(tool)\n"
        "    with SqliteSessionLog(Path(db)) as log:\n"
        "        async with ModelClient(ModelConfig(url, 'scripted'), api_key='k') as client:\n"
        "            agent = Agent(rt, rt.scope('agent', session=log), client)\n"
        "            outcome = await agent.run_turn('read notes.txt')\n"
        "    print(outcome.reason, repr(outcome.text))\n"
        "    print(sys.modules['openai'], 'pydantic' in sys.modules)\n"
        "anyio.run(main, *sys.argv[1:])\n"
    )
    with ModelServer(script) as server:
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                probe,
                server.base_url,
                str(workspace),
                str(tmp_path / "out"),
                str(tmp_path / "s.db"),
            ],
            capture_output=True,
            text=True,
            timeout=50,
        )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["done 'read it'", "None False"]
    assert len(server.requests) == 2
    assert "2: beta" in _tool_messages(server.requests[1])[0]["content"]


async def test_parallel_safe_siblings_overlap(workspace: Path, tmp_path: Path) -> None:
    # Each call waits for the other to have started: run one after the other, they would
    # never finish (the test's timeout fails it).
    started = {"ping": anyio.Event(), "pong": anyio.Event()}

    def meeting(name: str, other: str) -> Any:
        async def execute(args: Any, ctx: Any) -> Any:
            started[name].set()
            await started[other].wait()
            return f"{name} met {other}"

        return define_tool(
            name=name,
            description=f"Meets {other}.",
            parameters={},
            output=ToolOutput(schema={"type": "string"}, render=lambda args, value: [text(value)]),
            execute=execute,
            is_concurrency_safe=lambda args: True,
        )

    rt = _native(workspace, tmp_path)
    rt.register(meeting("ping", "pong"))
    rt.register(meeting("pong", "ping"))
    script = [Reply(calls=[Call("p1", "ping"), Call("p2", "pong")]), Reply(text=["met"])]
    with ModelServer(script) as server:
        host = Host(rt, tmp_path / "s.db", server)
        outcome, _ = await _run(host, "meet")
    assert outcome.reason == "done"
    assert [t["content"] for t in _tool_messages(server.requests[1])] == [
        "ping met pong",
        "pong met ping",
    ]


def test_tool_call_deltas_without_index_split_on_a_new_id() -> None:
    from codemode.agent._model import _Assembly

    parts = _Assembly()
    for delta in [
        {"index": None, "id": "a", "function": {"name": "read", "arguments": '{"x"'}},
        {"function": {"arguments": ": 1}"}},
        {"id": "b", "function": {"name": "glob", "arguments": "{}"}},
    ]:
        parts.feed(delta)
    calls = parts.result("1")
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("a", "read", '{"x": 1}'),
        ("b", "glob", "{}"),
    ]
