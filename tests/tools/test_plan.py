"""Plan mode and ``exit_plan_mode``: per-scope state, every outcome text, cards."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode.engine import (
    AbortController,
    MemorySessionLog,
    Scope,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRuntime,
)
from codemode.tools._catalog import catalog_entry
from codemode.tools.interact import (
    PlanMode,
    PlanReview,
    PlanReviewOutcome,
    QuestionProvider,
    ScriptedQuestionProvider,
    build_exit_plan_mode,
    plan_title,
)
from tests.tools.test_ask import error_of, make_cfg

pytestmark = pytest.mark.anyio
_ids = itertools.count(1)
PLAN = "# Migrate the store\n\n1. Add the column.\n2. Backfill.\n"
APPROVED = "Plan approved — plan mode exited; carry out the plan starting with your next step."


class Rig:
    def __init__(self, tmp_path: Path, provider: QuestionProvider | None) -> None:
        self.plan_mode = PlanMode()
        self.rt = ToolRuntime()
        self.tool = build_exit_plan_mode(make_cfg(tmp_path), self.plan_mode, provider)
        self.rt.register(self.tool)
        self.session = MemorySessionLog()
        self.agent: Scope = self.rt.scope("agent", session=self.session)

    async def call(
        self, plan: Any = PLAN, *, agent: Scope | str | None = "default", signal: Any = None
    ) -> ToolExecutionResult:
        return await self.rt.execute(
            ToolExecutionInput(
                call_id=f"plan-{next(_ids)}",
                name="exit_plan_mode",
                arguments={"plan": plan},
                signal=signal or AbortController().signal,
                agent=self.agent if agent == "default" else agent,  # type: ignore[arg-type]
            )
        )


def outcome(decision: Any, feedback: str | None = None) -> PlanReviewOutcome:
    return PlanReviewOutcome(decision=decision, feedback=feedback)


async def test_approval_exits_plan_mode(tmp_path: Path) -> None:
    provider = ScriptedQuestionProvider([outcome("approve")])
    rig = Rig(tmp_path, provider)
    rig.plan_mode.enter(rig.agent)
    result = await rig.call()
    assert not result.is_error, result.to_json()
    assert result.value == {"approved": True}
    assert result.content == [{"type": "text", "text": APPROVED}]
    assert not rig.plan_mode.is_active(rig.agent)
    assert provider.asked == [PlanReview(plan=PLAN, title="Migrate the store")]
    # Out of plan mode now: the tool is no longer available.
    again = await rig.call()
    assert error_of(again) == ("exit_plan_mode is only available in plan mode", "PLAN_NOT_ACTIVE")


@pytest.mark.parametrize(
    ("reply", "message", "code"),
    [
        (
            outcome("dismiss"),
            "The user dismissed the plan review to speak instead; stay in plan mode, stop here, "
            "and wait for their message.",
            "PLAN_DISMISSED",
        ),
        (
            outcome("keep_planning"),
            "The user chose to keep planning; revise the plan and present it again.",
            "PLAN_KEEP_PLANNING",
        ),
        (
            outcome("keep_planning", "   "),
            "The user chose to keep planning; revise the plan and present it again.",
            "PLAN_KEEP_PLANNING",
        ),
        (
            outcome("keep_planning", " Split step 2 into batches. "),
            "The user chose to keep planning; their feedback: Split step 2 into batches.",
            "PLAN_KEEP_PLANNING",
        ),
    ],
)
async def test_every_non_approval_is_an_error_and_stays_in_plan_mode(
    tmp_path: Path, reply: PlanReviewOutcome, message: str, code: str
) -> None:
    rig = Rig(tmp_path, ScriptedQuestionProvider([reply]))
    rig.plan_mode.enter(rig.agent)
    result = await rig.call()
    assert error_of(result) == (message, code)
    assert result.content == [{"type": "text", "text": f"Error: {message}"}]
    assert rig.plan_mode.is_active(rig.agent)


async def test_preconditions_in_order(tmp_path: Path) -> None:
    rig = Rig(tmp_path, None)
    assert error_of(await rig.call(agent=None)) == (
        "exit_plan_mode requires a calling agent (no session to switch)",
        "PLAN_NO_AGENT",
    )
    assert error_of(await rig.call()) == (
        "exit_plan_mode is only available in plan mode",
        "PLAN_NOT_ACTIVE",
    )
    rig.plan_mode.enter(rig.agent)
    invalid = "exit_plan_mode requires a non-empty markdown plan starting with a # heading"
    for plan in ["", "  \n ", "Step 1\n# Title", "#NoSpace", "#   \nx"]:
        assert error_of(await rig.call(plan)) == (invalid, "PLAN_INVALID"), plan
    assert error_of(await rig.call("\n\n  ## Fine\nbody")) == (
        "no user-questions channel is available to review the plan; ask the user to switch "
        "the session mode instead",
        "PLAN_NO_CHANNEL",
    )


async def test_state_is_per_scope_children_have_their_own(tmp_path: Path) -> None:
    provider = ScriptedQuestionProvider([outcome("approve")])
    rig = Rig(tmp_path, provider)
    child = rig.rt.scope("child", parent=rig.agent, session=MemorySessionLog())
    changes: list[tuple[str, bool]] = []
    dispose = rig.plan_mode.on_change(lambda scope, active: changes.append((scope.name, active)))
    rig.plan_mode.enter(rig.agent)
    assert rig.plan_mode.is_active(rig.agent) and not rig.plan_mode.is_active(child)
    assert error_of(await rig.call(agent=child))[1] == "PLAN_NOT_ACTIVE"
    rig.plan_mode.enter(child)
    assert not (await rig.call(agent=child)).is_error
    assert provider.scopes == [child]
    assert rig.plan_mode.is_active(rig.agent) and not rig.plan_mode.is_active(child)
    dispose()
    rig.plan_mode.exit(rig.agent)
    assert changes == [("agent", True), ("child", True), ("child", False)]


@pytest.mark.parametrize("change", ["reload", "exit-enter"])
async def test_a_change_during_review_voids_the_verdict(tmp_path: Path, change: str) -> None:
    hold = anyio.Event()
    provider = ScriptedQuestionProvider([outcome("approve")], hold=hold)
    rig = Rig(tmp_path, provider)
    rig.plan_mode.enter(rig.agent)
    box: dict[str, Any] = {}
    async with anyio.create_task_group() as tg:

        async def call() -> None:
            box["result"] = await rig.call()

        tg.start_soon(call)
        await anyio.wait_all_tasks_blocked()
        assert len(provider.asked) == 1
        if change == "reload":
            rig.plan_mode.reload()
            rig.plan_mode.enter(rig.agent)
        else:
            rig.plan_mode.exit(rig.agent)
            rig.plan_mode.enter(rig.agent)
        hold.set()
    assert error_of(box["result"]) == (
        "the plan-mode service was reloaded while the plan was under review; present the "
        "plan again",
        "PLAN_RELOADED",
    )
    # The stale approval did not take the scope out of plan mode.
    assert rig.plan_mode.is_active(rig.agent)


async def test_abort_during_review(tmp_path: Path) -> None:
    rig = Rig(tmp_path, ScriptedQuestionProvider([outcome("approve")], hold=anyio.Event()))
    rig.plan_mode.enter(rig.agent)
    controller = AbortController()
    box: dict[str, Any] = {}
    async with anyio.create_task_group() as tg:

        async def call() -> None:
            box["result"] = await rig.call(signal=controller.signal)

        tg.start_soon(call)
        await anyio.wait_all_tasks_blocked()
        controller.abort("stop")
    assert error_of(box["result"]) == (
        "exit_plan_mode was aborted before the user reviewed the plan",
        "PLAN_ABORTED",
    )
    assert rig.plan_mode.is_active(rig.agent)


async def test_cards_and_catalog(tmp_path: Path) -> None:
    rig = Rig(tmp_path, ScriptedQuestionProvider([outcome("keep_planning", "more")]))
    rig.plan_mode.enter(rig.agent)
    # An indented, closed heading is still the plan's opening heading.
    assert error_of(await rig.call("  # Ship it #\nDo things."))[1] == "PLAN_KEEP_PLANNING"
    assert rig.tool.present_call is not None and rig.tool.present_result is not None
    assert rig.tool.present_call({"plan": "# Ship it\nDo."}) == {
        "card": "generic",
        "title": "Ship it",
        "content": [{"type": "text", "text": "# Ship it\nDo."}],
    }
    assert rig.tool.present_call({"plan": "no heading"})["title"] == "Plan"
    assert rig.tool.present_call({}) is None
    result = {"content": [{"type": "text", "text": "Error: x"}], "isError": True}
    assert rig.tool.present_result({"plan": PLAN}, result) == {
        "card": "generic",
        "title": "Plan review",
        "content": [{"type": "text", "text": "Error: x"}],
    }
    assert plan_title("intro\n#not-a-heading\n## Real title ##\n# Later") == "Real title"
    entry = catalog_entry("exit_plan_mode", "@deepseek-ai/dsh-plan-mode")
    assert (rig.tool.name, rig.tool.description, rig.tool.parameters) == (
        entry["name"],
        entry["description"],
        entry["parameters"],
    )
    assert rig.tool.is_concurrency_safe is None
