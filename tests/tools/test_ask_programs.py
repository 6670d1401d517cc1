"""``ask_user_question``, ``exit_plan_mode`` and ``skill`` driven from real programs in both
languages: sub-calls carry the program's agent, values are the canonical values, failures
throw with the bare message."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from codemode.engine import AbortController, MemorySessionLog, ToolExecutionInput, ToolRuntime
from codemode.sandbox import Limits, PythonRuntime, TypeScriptRuntime
from codemode.tools.interact import (
    PlanMode,
    PlanReviewOutcome,
    ScriptedQuestionProvider,
    build_ask_user_question,
    build_exit_plan_mode,
)
from codemode.tools.skills import SkillCatalog, build_skill_tool
from tests.tools.test_ask import make_cfg
from tests.tools.test_skill import write_skill

pytestmark = pytest.mark.anyio

LIMITS = Limits(max_compute_ms=10_000, max_wall_ms=30_000)

PYTHON = """
a = await tools.ask_user_question({'questions': [
    {'id': 'go', 'question': 'Proceed?', 'options': [{'label': 'Yes'}, {'label': 'No'}]}]})
s = await tools.skill({'name': 'greet'})
try:
    await tools.exit_plan_mode({'plan': '# Plan\\nstep'})
    kp = None
except ToolCallError as e:
    kp = [e.code, e.message]
p = await tools.exit_plan_mode({'plan': '# Plan\\nstep'})
return {'a': a, 's': s, 'kp': kp, 'p': p}
"""

TYPESCRIPT = """
const a = await tools.ask_user_question({questions: [
  {id: 'go', question: 'Proceed?', options: [{label: 'Yes'}, {label: 'No'}]}]});
const s = await tools.skill({name: 'greet'});
let kp: unknown = null;
try {
  await tools.exit_plan_mode({plan: '# Plan\\nstep'});
} catch (e: any) {
  kp = [e.code, e.message];
}
const p = await tools.exit_plan_mode({plan: '# Plan\\nstep'});
return {a, s, kp, p};
"""


@pytest.fixture(params=["python", "typescript"])
async def runtime(request: Any) -> AsyncIterator[tuple[str, Any]]:
    cls = PythonRuntime if request.param == "python" else TypeScriptRuntime
    async with cls(LIMITS) as rt:
        yield request.param, rt


async def test_program_drives_the_tools(tmp_path: Path, runtime: tuple[str, Any]) -> None:
    language, code_runtime = runtime
    skills = tmp_path / "skills"
    folder = write_skill(skills, "greet", "Say hello.\n", description="Greets.")
    provider = ScriptedQuestionProvider(
        [
            [{"id": "go", "selected": ["Yes"]}],
            PlanReviewOutcome(decision="keep_planning", feedback="add tests"),
            PlanReviewOutcome(decision="approve"),
        ]
    )
    plan_mode = PlanMode()
    cfg = make_cfg(tmp_path)
    rt = ToolRuntime(mode="code", code_runtime=code_runtime)
    rt.register(build_ask_user_question(cfg, provider))
    rt.register(build_exit_plan_mode(cfg, plan_mode, provider))
    rt.register(build_skill_tool(cfg, SkillCatalog([skills])))
    agent = rt.scope("agent", session=MemorySessionLog())
    plan_mode.enter(agent)
    result = await rt.execute(
        ToolExecutionInput(
            call_id="run-1",
            name="run_code",
            arguments={
                "code": PYTHON if language == "python" else TYPESCRIPT,
                "description": "Ask, load a skill, present a plan",
            },
            signal=AbortController().signal,
            agent=agent,
        )
    )
    assert not result.is_error, result.to_json()
    assert result.value["result"] == {
        "a": {"answers": [{"id": "go", "selected": ["Yes"]}]},
        "s": {
            "name": "greet",
            "provider": "filesystem",
            "resourceBase": {"kind": "directory", "path": str(folder)},
            "content": "Say hello.",
        },
        "kp": ["PLAN_KEEP_PLANNING", "The user chose to keep planning; their feedback: add tests"],
        "p": {"approved": True},
    }
    # Every sub-call asked on behalf of the program's agent, which has left plan mode.
    assert provider.scopes == [agent, agent, agent]
    assert not plan_mode.is_active(agent)
