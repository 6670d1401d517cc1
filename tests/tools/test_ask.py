"""``ask_user_question``: validation, the provider contract, abort, authority, rendering."""

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
from codemode.engine.policies import LocalSpillStore
from codemode.tools._catalog import catalog_entry
from codemode.tools._config import ToolsConfig
from codemode.tools.fs._paths import Workspace
from codemode.tools.interact import (
    Answer,
    Question,
    QuestionError,
    QuestionOption,
    QuestionProvider,
    ScriptedQuestionProvider,
    build_ask_user_question,
)

pytestmark = pytest.mark.anyio
_ids = itertools.count(1)


def make_cfg(tmp_path: Path) -> ToolsConfig:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return ToolsConfig(
        workspace=Workspace(ws),
        spill_store=LocalSpillStore(tmp_path / "spill"),
        output_dir=str(tmp_path / "out"),
    )


class Rig:
    """A runtime with ``ask_user_question`` on ``provider`` and an agent scope."""

    def __init__(self, tmp_path: Path, provider: QuestionProvider | None) -> None:
        self.rt = ToolRuntime()
        self.rt.register(build_ask_user_question(make_cfg(tmp_path), provider))
        self.agent: Scope = self.rt.scope("agent", session=MemorySessionLog())

    async def call(
        self, questions: Any, *, agent: Scope | str | None = "default", signal: Any = None
    ) -> ToolExecutionResult:
        return await self.rt.execute(
            ToolExecutionInput(
                call_id=f"ask-{next(_ids)}",
                name="ask_user_question",
                arguments={"questions": questions},
                signal=signal or AbortController().signal,
                agent=self.agent if agent == "default" else agent,  # type: ignore[arg-type]
            )
        )


def error_of(result: ToolExecutionResult) -> tuple[str, str | None]:
    assert result.is_error
    info = result.error.info  # type: ignore[union-attr]
    return result.error.message, (info.code if info is not None else None)  # type: ignore[union-attr]


QUESTIONS = [
    {
        "id": "db",
        "header": "Database",
        "question": "Which database?",
        "options": [
            {"label": "Postgres (Recommended)", "description": "Mature."},
            {"label": "SQLite"},
        ],
    },
    {
        "id": "langs",
        "question": "Which languages?",
        "options": [{"label": "Python"}, {"label": "TypeScript"}, {"label": "Go"}],
        "multi_select": True,
    },
    {"id": "name", "question": "Project name?"},
]


async def test_answers_come_back_in_question_order_as_compact_json(tmp_path: Path) -> None:
    provider = ScriptedQuestionProvider(
        [
            [
                {"id": "name", "custom": "zébra"},
                Answer(id="db", selected=("SQLite",)),
                {"id": "langs", "selected": ["Python", "Go"], "custom": "and Rust"},
            ]
        ]
    )
    rig = Rig(tmp_path, provider)
    result = await rig.call(QUESTIONS)
    assert not result.is_error, result.to_json()
    assert result.value == {
        "answers": [
            {"id": "db", "selected": ["SQLite"]},
            {"id": "langs", "selected": ["Python", "Go"], "custom": "and Rust"},
            {"id": "name", "selected": [], "custom": "zébra"},
        ]
    }
    assert result.content == [
        {
            "type": "text",
            "text": '{"answers":[{"id":"db","selected":["SQLite"]},'
            '{"id":"langs","selected":["Python","Go"],"custom":"and Rust"},'
            '{"id":"name","selected":[],"custom":"zébra"}]}',
        }
    ]
    # The provider saw typed, validated questions, and who asked.
    [asked] = provider.asked
    assert asked[0] == Question(
        id="db",
        question="Which database?",
        header="Database",
        options=(
            QuestionOption(label="Postgres (Recommended)", description="Mature."),
            QuestionOption(label="SQLite"),
        ),
    )
    assert isinstance(asked, tuple) and asked[1].multi_select and asked[2].options == ()
    assert provider.scopes == [rig.agent]


@pytest.mark.parametrize(
    ("questions", "message"),
    [
        ([], "ask_user_question requires at least one question"),
        ([{"id": " ", "question": "q?"}], "question 1 needs a non-empty id"),
        (
            [{"id": "a", "question": "q?"}, {"id": "a", "question": "r?"}],
            'duplicate question id "a"',
        ),
        ([{"id": "a", "question": "  "}], 'question "a" needs a non-empty question text'),
        (
            [{"id": "a", "question": "q?", "options": [{"label": ""}]}],
            'question "a" has an option with an empty label',
        ),
        (
            [{"id": "a", "question": "q?", "options": [{"label": "x"}, {"label": "x"}]}],
            'question "a" lists the option "x" twice',
        ),
    ],
)
async def test_invalid_questions_fail_before_the_user_is_asked(
    tmp_path: Path, questions: Any, message: str
) -> None:
    provider = ScriptedQuestionProvider()
    result = await Rig(tmp_path, provider).call(questions)
    assert error_of(result) == (message, "QUESTION_INVALID")
    assert result.content == [{"type": "text", "text": f"Error: {message}"}]
    assert provider.asked == []


async def test_no_provider(tmp_path: Path) -> None:
    result = await Rig(tmp_path, None).call(QUESTIONS)
    assert error_of(result) == ("no user-questions provider is registered", "QUESTION_NO_PROVIDER")


async def test_only_an_agent_may_ask(tmp_path: Path) -> None:
    provider = ScriptedQuestionProvider([[{"id": "name", "custom": "x"}]])
    result = await Rig(tmp_path, provider).call(QUESTIONS[2:], agent=None)
    assert error_of(result) == (
        "ask_user_question requires a calling agent (no session to ask for)",
        "QUESTION_NO_AGENT",
    )
    assert provider.asked == []


async def test_abort_while_the_user_thinks_cancels_the_provider(tmp_path: Path) -> None:
    state: dict[str, Any] = {}
    started = anyio.Event()

    async def slow(request: Any) -> Any:
        started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            state["cancelled"] = True
            raise

    rig = Rig(tmp_path, ScriptedQuestionProvider(slow))
    controller = AbortController()
    async with anyio.create_task_group() as tg:

        async def call() -> None:
            state["result"] = await rig.call(QUESTIONS[2:], signal=controller.signal)

        tg.start_soon(call)
        await started.wait()
        controller.abort("user pressed Esc")
    assert error_of(state["result"]) == (
        "ask_user_question was aborted before the user answered",
        "QUESTION_ABORTED",
    )
    assert state["cancelled"] is True


async def test_already_aborted_call_never_reaches_the_provider(tmp_path: Path) -> None:
    provider = ScriptedQuestionProvider([[{"id": "name", "custom": "x"}]])
    controller = AbortController()
    controller.abort("gone")
    result = await Rig(tmp_path, provider).call(QUESTIONS[2:], signal=controller.signal)
    assert result.is_error and provider.asked == []


@pytest.mark.parametrize(
    ("answers", "detail"),
    [
        ([{"id": "db", "selected": ["MySQL"]}], '"MySQL" is not an option of question "db"'),
        ([{"id": "db", "selected": ["SQLite", "Postgres (Recommended)"]}], "takes a single"),
        ([], 'no answer for question "db"'),
        (
            [{"id": "db", "selected": ["SQLite"]}, {"id": "zz", "custom": "x"}],
            'unknown question "zz"',
        ),
        ([{"id": "db"}], 'the answer to question "db" is empty'),
        (
            [{"id": "db", "selected": ["SQLite"]}, {"id": "db", "selected": ["SQLite"]}],
            "two answers",
        ),
    ],
)
async def test_a_provider_answer_that_does_not_fit_is_refused(
    tmp_path: Path, answers: Any, detail: str
) -> None:
    result = await Rig(tmp_path, ScriptedQuestionProvider([answers])).call(QUESTIONS[:1])
    message, code = error_of(result)
    assert code == "QUESTION_INVALID_ANSWER"
    assert message.startswith("the user-questions provider returned an invalid answer: ")
    assert detail in message


async def test_a_provider_failure_is_the_calls_failure(tmp_path: Path) -> None:
    provider = ScriptedQuestionProvider([QuestionError("no terminal", "QUESTION_UNAVAILABLE")])
    result = await Rig(tmp_path, provider).call(QUESTIONS[2:])
    assert error_of(result) == ("no terminal", "QUESTION_UNAVAILABLE")


async def test_scripted_provider_runs_dry_clearly(tmp_path: Path) -> None:
    result = await Rig(tmp_path, ScriptedQuestionProvider()).call(QUESTIONS[2:])
    assert error_of(result) == (
        "the scripted question provider has no reply left",
        "QUESTION_UNAVAILABLE",
    )


async def test_catalog_schema_exclusive_and_no_card(tmp_path: Path) -> None:
    tool = build_ask_user_question(make_cfg(tmp_path), None)
    entry = catalog_entry("ask_user_question", "@deepseek-ai/dsh-tool-ask-user")
    assert (tool.name, tool.description, tool.parameters) == (
        entry["name"],
        entry["description"],
        entry["parameters"],
    )
    assert tool.is_concurrency_safe is None
    assert tool.present_call is None and tool.present_result is None
    assert isinstance(ScriptedQuestionProvider(), QuestionProvider)


def test_error_families() -> None:
    from codemode.tools.interact import PlanModeError
    from codemode.tools.skills import SkillError

    for cls, family in [
        (QuestionError, "QUESTION_"),
        (PlanModeError, "PLAN_"),
        (SkillError, "SKILL_"),
    ]:
        assert cls.family == family  # type: ignore[attr-defined]
        assert cls.code.startswith(family)
        assert cls("m").code == cls.code
        assert cls("m", family + "X").code == family + "X"
