"""``ask_user_question``: ask the user through the host's question provider."""

from __future__ import annotations

from typing import Any

from codemode.engine import ToolDefinition, ToolOutput, text

from .._catalog import define_catalog_tool
from .._config import ToolsConfig
from .._errors import QuestionError
from .._text import js_json
from ._questions import QuestionProvider, check_answers, parse_questions, until_aborted

__all__ = ["build_ask_user_question"]

_OUTPUT_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "answers": {
            "type": "array",
            "required": True,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "id": {"type": "string", "required": True},
                    "selected": {"type": "array", "items": {"type": "string"}, "required": True},
                    "custom": {"type": "string"},
                },
            },
        }
    },
}


def build_ask_user_question(cfg: ToolsConfig, questions: QuestionProvider | None) -> ToolDefinition:
    """The ``ask_user_question`` tool asking through ``questions`` (``None``: every call
    fails with ``no user-questions provider is registered``)."""

    async def execute(args: Any, ctx: Any) -> Any:
        # Only an agent may speak to the user: a host-initiated call has nobody to answer
        # for. Sub-calls of a run_code program carry the program's agent, so they may ask.
        if ctx.agent is None:
            raise QuestionError(
                "ask_user_question requires a calling agent (no session to ask for)",
                "QUESTION_NO_AGENT",
            )
        parsed = parse_questions(args["questions"])
        if questions is None:
            raise QuestionError("no user-questions provider is registered", "QUESTION_NO_PROVIDER")
        provider = questions

        async def ask() -> Any:
            return await provider.ask(parsed, scope=ctx.agent, signal=ctx.signal)

        answers = await until_aborted(
            ask,
            ctx.signal,
            lambda: QuestionError(
                "ask_user_question was aborted before the user answered", "QUESTION_ABORTED"
            ),
        )
        return {"answers": [a.to_value() for a in check_answers(parsed, answers)]}

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        return [text(js_json(value))]

    return define_catalog_tool(
        "ask_user_question",
        output=ToolOutput(schema=_OUTPUT_SCHEMA, render=render),
        execute=execute,
    )
