"""``todo_write``: whole-list replacement recorded as ``todo/write`` session events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.tools.conftest import Harness, error_of, text_of

pytestmark = pytest.mark.anyio


def todos(*items: tuple[str, str]) -> dict[str, Any]:
    return {"todos": [{"content": c, "status": s} for c, s in items]}


async def test_records_the_list(harness: Harness) -> None:
    args = todos(("  Plan  ", "completed"), ("Build", "in_progress"), ("Test", "pending"))
    result = await harness.ok("todo_write", args)
    expected = [
        {"content": "Plan", "status": "completed"},
        {"content": "Build", "status": "in_progress"},
        {"content": "Test", "status": "pending"},
    ]
    assert result.value == {
        "todos": expected,
        "counts": {"pending": 1, "inProgress": 1, "completed": 1},
    }
    assert text_of(result) == "Updated todo list: 1 pending, 1 in progress, 1 completed."
    await harness.ok("todo_write", {"todos": []})
    events = [e for e in harness.session.events if e["type"] == "todo/write"]
    assert events == [
        {"type": "todo/write", "todos": expected},
        {"type": "todo/write", "todos": []},
    ]


async def test_parallel_in_progress(harness: Harness, workspace: Path, output_dir: Path) -> None:
    two = todos(("A", "in_progress"), ("B", "in_progress"))
    assert (await harness.ok("todo_write", two)).value["counts"]["inProgress"] == 2
    single = Harness(workspace, output_dir, allow_parallel_in_progress=False)
    assert error_of(await single.fail("todo_write", two)) == (
        "invalid todos: at most one task may be in_progress (got 2)",
        None,
    )
    await single.ok("todo_write", todos(("A", "in_progress"), ("B", "pending")))


async def test_value_errors(harness: Harness) -> None:
    assert error_of(await harness.fail("todo_write", todos((" ", "pending")))) == (
        "invalid todo: `content` must be a non-empty string",
        None,
    )
    assert error_of(
        await harness.fail("todo_write", todos(("Ship é", "pending"), (" Ship é", "completed")))
    ) == ('invalid todos: duplicate content "Ship é"', None)
    # Checked after the list itself is valid.
    assert error_of(await harness.fail("todo_write", todos(("A", "pending")), agent=None)) == (
        "todo_write requires an owning agent session",
        None,
    )
    no_session = harness.rt.scope("bare")
    assert error_of(
        await harness.fail("todo_write", todos(("A", "pending")), agent=no_session)
    ) == (
        "todo_write requires an owning agent session",
        None,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, 'missing required property "todos"'),
        ({"todos": "A"}, '"todos" must be an array'),
        ({"todos": [{"content": "A"}]}, 'missing required property "todos[0].status"'),
        (
            {"todos": [{"content": "A", "status": "done"}]},
            '"todos[0].status" must be one of ["pending","in_progress","completed"]',
        ),
        (
            {"todos": [{"content": "A", "status": "pending", "priority": 1}]},
            '"todos[0].priority" is not a declared property (additionalProperties: false)',
        ),
        ({"todos": [{"content": 1, "status": "pending"}]}, '"todos[0].content" must be a string'),
    ],
)
async def test_schema_errors(harness: Harness, args: dict[str, Any], message: str) -> None:
    assert error_of(await harness.fail("todo_write", args)) == (
        f"invalid arguments: {message}",
        "INVALID_ARGS",
    )


async def test_card(harness: Harness) -> None:
    tool = harness.rt.get("todo_write")
    assert tool is not None and tool.present_call is not None
    args = todos(("A", "pending"))
    assert tool.present_call(args) == {
        "card": "generic",
        "title": "Update todo list",
        "kind": "other",
        "rawInput": args["todos"],
    }
