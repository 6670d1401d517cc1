"""``workflow``: scripts in the QuickJS guest orchestrating children through the pipeline."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode.agent import (
    WORKFLOW_LIMITS,
    Agent,
    AgentEvent,
    ModelClient,
    ModelConfig,
    WorkflowRuntime,
    build_workflow_tool,
    enable_subagents,
    render_workflow_value,
)
from codemode.engine import AbortController, MemorySessionLog, SqliteSessionLog, ToolRuntime
from codemode.sandbox import TypeScriptRuntime
from tests.agent.harness import FAST, agent_tree, tool_text
from tests.agent.model_server import Call, Hold, ModelServer, Reply

pytestmark = pytest.mark.anyio

META = {"name": "audit-files", "description": "Audit every file."}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def js() -> AsyncIterator[TypeScriptRuntime]:
    async with TypeScriptRuntime(limits=WORKFLOW_LIMITS) as runtime:
        yield runtime


@contextlib.asynccontextmanager
async def _root(
    server: ModelServer, tmp_path: Path, js: TypeScriptRuntime, **options: Any
) -> AsyncIterator[tuple[Agent, list[AgentEvent], SqliteSessionLog]]:
    async with agent_tree(server, tmp_path, build_workflow_tool(js, **options)) as tree:
        yield tree.agent, tree.events, tree.log


def _workflow(script: str, meta: dict[str, Any] | None = None, **extra: Any) -> Reply:
    args = {"script": script, "meta": meta or META, **extra}
    return Reply(calls=[Call("w1", "workflow", [json.dumps(args)])])


_tool_text = tool_text


def _user_text(body: dict[str, Any]) -> str:
    return str(next(m["content"] for m in body["messages"] if m["role"] == "user"))


FAN_OUT = """
phase("Scan");
log(`auditing ${args.files.length} files`);
const schema = {
  type: "object",
  properties: {file: {type: "string"}, issues: {type: "integer"}},
  required: ["file", "issues"],
  additionalProperties: false,
};
const found = await pipeline(
  args.files,
  (file) => agent(`Audit file ${file}`, {schema, label: file, phase: "Scan"}),
);
phase("Summarise");
const ok = found.filter(Boolean);
return {audited: ok.length, failed: found.length - ok.length,
        issues: ok.reduce((n, r) => n + r.issues, 0), first: ok[0]};
"""


async def test_fan_out_over_20_children_with_a_schema(
    tmp_path: Path, js: TypeScriptRuntime
) -> None:
    files = [f"src/m{i:02d}.py" for i in range(20)]
    calls: list[str] = []

    def child(body: dict[str, Any]) -> Reply:
        file = re.search(r"Audit file (\S+)", _user_text(body)).group(1)  # type: ignore[union-attr]
        calls.append(file)
        if file == "src/m07.py" and calls.count(file) == 1:
            return Reply(text=["I looked, it has 2 issues."])  # no JSON: one repair turn
        if file == "src/m13.py":
            return Reply(text=['```json\n{"file": 13}\n```'])  # invalid twice: null
        n = int(file[5:7]) % 3
        return Reply(text=[f'Done.\n```json\n{{"file": "{file}", "issues": {n}}}\n```'])

    with ModelServer(
        [_workflow(FAN_OUT, args={"files": files}), Reply(text=["audited"])],
        by_prompt={"Audit file": [child] * 22},
    ) as server:
        async with _root(server, tmp_path, js, max_concurrency=4) as (agent, events, _log):
            outcomes = await agent.run("audit the repo")
    assert outcomes[-1].ok
    text = _tool_text(server, "audit the repo")
    assert text.startswith('workflow "audit-files" completed (20 agents).\nReturn value:\n')
    value = json.loads(text.split("Return value:\n", 1)[1])
    expected_issues = sum(int(f[5:7]) % 3 for f in files if f != "src/m13.py")
    assert value == {
        "audited": 19,
        "failed": 1,
        "issues": expected_issues,
        "first": {"file": "src/m00.py", "issues": 0},
    }
    # m07 got one repair turn in the same child (it saw its first answer); m13 two turns.
    assert calls.count("src/m07.py") == 2 and calls.count("src/m13.py") == 2
    repair = [r for r in server.requests_for("Audit file src/m07.py")][-1].messages
    assert "did not match the required JSON Schema" in repair[-1]["content"]
    # Progress: phases, a log line, and never more than 4 children at once.
    wf = [e for e in events if e["type"] == "workflow"]
    assert [e["title"] for e in wf if e["event"] == "phase"] == ["Scan", "Summarise"]
    assert [e["message"] for e in wf if e["event"] == "log"] == ["auditing 20 files"]
    assert max(e["running"] for e in wf) == 4
    end = wf[-1]
    assert end["event"] == "end" and end["outcome"] == "completed"
    assert (end["started"], end["done"], end["failed"]) == (20, 19, 1)
    # Each agent() went through the pipeline as a sub-call, with its dispatch events.
    dispatched = [
        e
        for e in SqliteSessionLog.read(tmp_path / "sessions" / "root.db")
        if e["type"] == "tool/code-dispatch-start" and e.get("name") == "agent"
    ]
    assert len(dispatched) == 20


async def test_pipeline_stages_parallel_and_args(tmp_path: Path, js: TypeScriptRuntime) -> None:
    script = """
const out = await pipeline(
  args.items,
  (item) => agent(`Draft ${item}`),
  (draft, item, index) => { if (item === "b") throw new Error("drop b"); return `${index}:${draft}`; },
  async (prev) => prev.toUpperCase(),
);
const both = await parallel([() => agent("Check one"), () => { throw new Error("x"); }]);
return {out, both, proto: Object.keys(args.raw), timers: typeof setTimeout, tools: typeof tools};
"""
    with ModelServer(
        [
            _workflow(script, args={"items": ["a", "b", "c"], "raw": {"__proto__": 1}}),
            Reply(text=["ok"]),
        ],
        by_prompt={
            "Draft": [lambda b: Reply(text=[f"draft of {_user_text(b).split()[1]}"])] * 3,
            "Check one": [Reply(text=["checked"])],
        },
    ) as server:
        async with _root(server, tmp_path, js) as (agent, _events, _log):
            await agent.run("draft things")
    value = json.loads(_tool_text(server, "draft things").split("Return value:\n", 1)[1])
    assert value == {
        "out": ["0:DRAFT OF A", None, "2:DRAFT OF C"],
        "both": ["checked", None],
        "proto": ["__proto__"],
        "timers": "undefined",
        "tools": "undefined",
    }


@pytest.mark.parametrize(
    ("script", "message"),
    [
        (
            'try { await agent("x", {effort: "high"}); } catch (e) {} return "survived";',
            'workflow run failed: agent(): unknown option "effort" (allowed: schema, label, '
            "phase, provider, model)",
        ),
        (
            'const r = await parallel([() => agent("x", {schema: {type: "object", '
            'properties: {a: {type: "string", pattern: "^a"}}}})]); return r;',
            "workflow run failed: agent(): unsupported JSON schema: opts.schema.properties.a: "
            'unsupported keyword "pattern"',
        ),
        (
            "const r = await pipeline([1], () => pipeline(7, (x) => x)); return r;",
            "workflow run failed: pipeline(items, ...stages): items must be an array",
        ),
        (
            'try { await agent(""); } catch (e) {} return 1;',
            "workflow run failed: agent(prompt, opts?): prompt must be a non-empty string",
        ),
        (
            'await agent("x", {provider: "elsewhere"}); return 1;',
            "workflow run failed: agent(): unknown provider 'elsewhere' (this host offers: none)",
        ),
    ],
)
async def test_misused_hooks_always_kill_the_script(
    tmp_path: Path, js: TypeScriptRuntime, script: str, message: str
) -> None:
    with ModelServer([_workflow(script), Reply(text=["ok"])]) as server:
        async with _root(server, tmp_path, js) as (agent, _events, _log):
            await agent.run("misuse it")
    assert _tool_text(server, "misuse it") == f"Error: {message}"
    # No child was ever asked (misuse is found before one starts).
    assert len(server.requests) == 2


async def test_the_total_agent_cap_kills_even_through_parallel(
    tmp_path: Path, js: TypeScriptRuntime
) -> None:
    script = "return await parallel([1, 2, 3].map((i) => () => agent(`Job ${i}`)));"
    with ModelServer(
        [_workflow(script), Reply(text=["ok"])],
        by_prompt={"Job": [Reply(text=["done"])] * 3},
    ) as server:
        async with _root(server, tmp_path, js, max_agents=2) as (agent, _events, _log):
            await agent.run("capped")
    assert _tool_text(server, "capped") == (
        "Error: workflow run failed: agent(): the workflow already started 2 agents (the cap "
        "is 2); coordinate fewer, larger tasks"
    )


@pytest.mark.parametrize(
    ("script", "meta", "message"),
    [
        (
            'export const meta = {name: "x"};\nreturn 1;',
            META,
            "invalid workflow script: line 1: an export statement; the script is a plain body "
            "(meta is the tool's meta parameter, not `export const meta`)",
        ),
        (
            "const n: number = 1;\nreturn n;",
            META,
            "invalid workflow script: line 1: TypeScript syntax (type_annotation); the script "
            "must be plain JavaScript",
        ),
        (
            "const a = 1;\nreturn a +;",
            META,
            "invalid workflow script: line 2: syntax error",
        ),
        (
            "return 1;",
            {"name": "Audit Files", "description": "d"},
            "invalid workflow meta: "
            "meta.name must be short kebab-case (e.g. \"audit-files\"), got 'Audit Files'",
        ),
        (
            "return 1;",
            {"name": "a", "description": " "},
            "invalid workflow meta: meta.description must be a non-empty string",
        ),
    ],
)
async def test_static_checks_refuse_before_anything_runs(
    tmp_path: Path, js: TypeScriptRuntime, script: str, meta: dict[str, Any], message: str
) -> None:
    with ModelServer([_workflow(script, meta), Reply(text=["ok"])]) as server:
        async with _root(server, tmp_path, js) as (agent, events, _log):
            await agent.run("check it")
    assert _tool_text(server, "check it").startswith(f"Error: {message}")
    assert not [e for e in events if e["type"] == "workflow"]


async def test_a_thrown_error_and_a_model_override(tmp_path: Path, js: TypeScriptRuntime) -> None:
    script = 'const a = await agent("Use the other model", {model: "other-model"});\nthrow new Error(`boom after ${a}`);'
    with ModelServer(
        [_workflow(script), Reply(text=["ok"])],
        by_prompt={"Use the other model": [Reply(text=["fine"])]},
    ) as server:
        async with _root(server, tmp_path, js) as (agent, _events, _log):
            await agent.run("throw")
    # The script's own line numbers, not the wrapped program's.
    assert _tool_text(server, "throw") == (
        "Error: workflow run failed: Error: boom after fine\n    at <anonymous> (<script>:2)"
    )
    assert server.requests_for("Use the other model")[0].body["model"] == "other-model"


async def test_cancelling_the_caller_stops_every_child(
    tmp_path: Path, js: TypeScriptRuntime
) -> None:
    script = 'return await parallel([() => agent("Hold one"), () => agent("Hold two")]);'
    with ModelServer(
        [_workflow(script)],
        by_prompt={"Hold one": [Hold(text=["..."])], "Hold two": [Hold(text=["..."])]},
    ) as server:
        async with _root(server, tmp_path, js) as (agent, events, _log):
            controller = AbortController()
            both_started = anyio.Event()

            def watch(event: AgentEvent) -> None:
                events.append(event)
                if sum(1 for e in events if e.get("event") == "agent-start") == 2:
                    both_started.set()

            agent.on_event = watch
            async with anyio.create_task_group() as tg:

                async def run() -> None:
                    await agent.run("hold", signal=controller.signal)

                tg.start_soon(run)
                with anyio.fail_after(20):
                    await both_started.wait()
                controller.abort("the user stopped it")
    wf = [e for e in events if e["type"] == "workflow"]
    assert wf[-1]["event"] == "end" and wf[-1]["outcome"] == "cancelled"
    assert wf[-1]["failed"] == 2 and wf[-1]["running"] == 0


def test_render_cuts_long_results() -> None:
    value = {"runId": "r", "agentsStarted": 1, "result": "x" * 60_000}
    out = render_workflow_value("big", value)
    assert out.startswith('workflow "big" completed (1 agent).\nReturn value:\n"xxx')
    assert out.endswith("\n… [truncated: 10002 more characters]")


async def test_without_an_agent_or_a_subagent_host(js: TypeScriptRuntime) -> None:
    rt = ToolRuntime(mode="native")
    rt.register(build_workflow_tool(js))
    from codemode.engine import ToolExecutionInput

    result = await rt.execute(
        ToolExecutionInput(
            "c1", "workflow", {"script": "return 1;", "meta": META}, AbortController().signal
        )
    )
    assert result.is_error
    assert result.error.message == "workflow requires a calling agent (exec.agent was undefined)"
    with pytest.raises(ValueError, match="TypeScript code runtime"):
        build_workflow_tool(object())


async def test_the_callers_guards_apply_to_workflow_children(
    tmp_path: Path, js: TypeScriptRuntime
) -> None:
    script = 'return await agent("Try to write");'
    with ModelServer(
        [_workflow(script), Reply(text=["ok"])],
        by_prompt={
            "Try to write": [
                Reply(
                    calls=[Call("c1", "write", [json.dumps({"file_path": "x", "content": "y"})])]
                ),
                lambda body: Reply(text=[str(body["messages"][-1]["content"])]),
            ]
        },
    ) as server:
        async with _root(server, tmp_path, js) as (agent, _events, _log):
            agent.scope.guard(lambda ex: "writes are off here" if ex.name == "write" else None)
            await agent.run("guarded")
    value = json.loads(_tool_text(server, "guarded").split("Return value:\n", 1)[1])
    assert "writes are off here" in value
    assert not (tmp_path / "ws" / "x").exists()


async def test_a_program_in_code_mode_starts_a_workflow(
    tmp_path: Path, js: TypeScriptRuntime
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    rt = ToolRuntime(mode="code", code_runtime=js)
    rt.register(build_workflow_tool(js))
    program = (
        "const r = await tools.workflow({meta: {name: 'from-code', description: 'd'}, "
        "script: 'return [await agent(\"Say hi\"), args.n];', args: {n: 3}});\n"
        "return r.result;"
    )
    run_code = json.dumps({"description": "start it", "code": program})
    with ModelServer(
        [Reply(calls=[Call("c1", "run_code", [run_code])]), Reply(text=["done"])],
        by_prompt={"Say hi": [Reply(text=["hi"])]},
    ) as server:
        async with ModelClient(
            ModelConfig(server.base_url, "scripted", retry=FAST), api_key="k"
        ) as client:
            agent = Agent(rt, rt.scope("agent", session=MemorySessionLog()), client)
            async with enable_subagents(agent):
                await agent.run("code it")
    assert json.loads(_tool_text(server, "code it")) == ["hi", 3]


async def test_a_hostile_answer_is_a_failed_child_not_a_dead_host(
    tmp_path: Path, js: TypeScriptRuntime
) -> None:
    deep = "[" * 200_000 + "]" * 200_000
    schema = '{type: "object", properties: {}, additionalProperties: true}'
    script = f'return [await agent("Deep one", {{schema: {schema}}}), "after"];'
    with ModelServer(
        [_workflow(script), Reply(text=["ok"])],
        by_prompt={"Deep one": [Reply(text=[deep]), Reply(text=[f"```json\n{deep}\n```"])]},
    ) as server:
        async with _root(server, tmp_path, js) as (agent, _events, _log):
            await agent.run("deep")
    value = json.loads(_tool_text(server, "deep").split("Return value:\n", 1)[1])
    assert value == [None, "after"]


async def test_a_phase_declares_the_model_its_children_use(
    tmp_path: Path, js: TypeScriptRuntime
) -> None:
    meta = {**META, "phases": [{"title": "Deep", "detail": "slow thinking", "model": "big"}]}
    script = 'await agent("Before any phase");\nphase("Deep");\nawait agent("In the deep phase");\nreturn 1;'
    with ModelServer(
        [_workflow(script, meta), Reply(text=["ok"])],
        by_prompt={"Before any": [Reply(text=["a"])], "In the deep": [Reply(text=["b"])]},
    ) as server:
        async with _root(server, tmp_path, js) as (agent, events, _log):
            await agent.run("phased")
    assert server.requests_for("Before any")[0].body["model"] == "scripted"
    assert server.requests_for("In the deep")[0].body["model"] == "big"
    shown = [e for e in events if e["type"] == "workflow" and e["event"] == "phase"]
    assert shown[0]["detail"] == "slow thinking"
    bad = {**META, "phases": [{"title": "X", "provider": "elsewhere"}]}
    with ModelServer([_workflow("return 1;", bad), Reply(text=["ok"])]) as server:
        async with _root(server, tmp_path, js) as (agent, _events, _log):
            await agent.run("bad phase")
    assert _tool_text(server, "bad phase") == (
        "Error: invalid workflow meta: meta.phases[0].provider 'elsewhere' is not a provider "
        "of this host (it offers: none)"
    )


async def test_the_workflow_runtime_starts_on_first_use(tmp_path: Path) -> None:
    lazy = WorkflowRuntime()
    script = 'return await agent("Lazy child");'
    with ModelServer(
        [_workflow(script), Reply(text=["ok"]), _workflow(script), Reply(text=["ok"])],
        by_prompt={"Lazy child": [Reply(text=["ran"])]},
    ) as server:
        async with lazy:
            async with agent_tree(server, tmp_path, build_workflow_tool(lazy)) as tree:
                assert not lazy.started  # no sandbox until a workflow runs
                await tree.agent.run("lazy one")
                assert lazy.started
        assert not lazy.started
        assert tool_text(server, "lazy one").endswith('Return value:\n"ran"')
        # Not entered: the call says so (the host survives).
        async with agent_tree(server, tmp_path, build_workflow_tool(WorkflowRuntime())) as tree:
            await tree.agent.run("lazy two")
    assert tool_text(server, "lazy two") == (
        "Error: workflow is unavailable: its runtime is not running (enter the "
        "WorkflowRuntime with `async with`)"
    )
