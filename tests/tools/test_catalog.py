"""The tools expose the seed catalog's names (tests/data/seed_catalog.json), descriptions and input schemas verbatim."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codemode.engine import ToolRuntime
from codemode.tools import default_tools

REPO = Path(__file__).resolve().parents[2]
# The seed catalog, vendored (tests/data/README.md).
SEED_CATALOG = REPO / "tests" / "data" / "seed_catalog.json"
PACKAGED_CATALOG = REPO / "tools" / "_catalog.json"

PACKAGES = {
    "read": "@deepseek-ai/dsh-tool-fs",
    "write": "@deepseek-ai/dsh-tool-fs",
    "edit": "@deepseek-ai/dsh-tool-fs",
    "read_image": "@deepseek-ai/dsh-tool-fs",
    "str_replace_editor": "@deepseek-ai/dsh-tool-str-replace-editor",
    "glob": "@deepseek-ai/dsh-tool-fs-search",
    "grep": "@deepseek-ai/dsh-tool-fs-search",
    "bash": "@deepseek-ai/dsh-tool-bash",
    "job_list": "@deepseek-ai/dsh-tool-jobs",
    "job_output": "@deepseek-ai/dsh-tool-jobs",
    "job_kill": "@deepseek-ai/dsh-tool-jobs",
    "todo_write": "@deepseek-ai/dsh-tool-todo",
}
# Part 2's tools that default_tools always includes (their services are optional).
ALWAYS = {
    "ask_user_question": "@deepseek-ai/dsh-tool-ask-user",
    "exit_plan_mode": "@deepseek-ai/dsh-plan-mode",
    "skill": "@deepseek-ai/dsh-tool-skill",
    "web_fetch": "@deepseek-ai/dsh-tool-web",
    "web_search": "@deepseek-ai/dsh-tool-web",
}
# Part 2 of the catalog (terminals, persistent bash, web, questions, plan review, skills,
# LSP): packaged here, built by their own subpackages.
PART_TWO = {
    ("@deepseek-ai/dsh-tool-terminal", name)
    for name in (
        "terminal_open",
        "terminal_send",
        "terminal_read",
        "terminal_signal",
        "terminal_list",
        "terminal_close",
    )
} | {
    ("@deepseek-ai/dsh-tool-bash-persistent", "bash"),
    ("@deepseek-ai/dsh-tool-web", "web_fetch"),
    ("@deepseek-ai/dsh-tool-web", "web_search"),
    ("@deepseek-ai/dsh-tool-ask-user", "ask_user_question"),
    ("@deepseek-ai/dsh-plan-mode", "exit_plan_mode"),
    ("@deepseek-ai/dsh-tool-skill", "skill"),
    ("@deepseek-ai/dsh-tool-lsp", "lsp"),
}


# The agent-bound rows (goals, schedules, session queries, subagents): packaged here, built
# by codemode.agent (its tests check the tools against these entries).
AGENT_BOUND = (
    {("@deepseek-ai/dsh-tool-goal", name) for name in ("create_goal", "get_goal", "update_goal")}
    | {
        ("@deepseek-ai/dsh-schedule", name)
        for name in ("schedule_create", "schedule_list", "schedule_delete")
    }
    | {
        ("@deepseek-ai/dsh-tool-session-query", name)
        for name in (
            "session_search",
            "session_event_search",
            "session_trace",
            "session_event_trace",
            "session_event_read",
        )
    }
    | {
        # Subagents and workflows.
        ("@deepseek-ai/dsh-tool-subagent", "subagent"),
        ("@deepseek-ai/dsh-tool-subagent-control", "list_agents"),
        ("@deepseek-ai/dsh-tool-subagent-control", "send_message"),
        ("@deepseek-ai/dsh-tool-subagent-control", "interrupt_agent"),
        ("@deepseek-ai/dsh-tool-subagent-report", "report"),
        ("@deepseek-ai/dsh-tool-workflow", "workflow"),
        ("@deepseek-ai/dsh-tool-ralph", "ralph"),
    }
)


def _packaged_all() -> dict[tuple[str, str], dict[str, object]]:
    data = json.loads(PACKAGED_CATALOG.read_text(encoding="utf-8"))
    return {(entry["package"], entry["name"]): entry for entry in data["tools"]}


def _packaged() -> dict[str, dict[str, object]]:
    # The default variant of each name.
    return {
        name: _packaged_all()[(package, name)] for name, package in {**PACKAGES, **ALWAYS}.items()
    }


def _dump(value: object) -> str:
    # Order-sensitive: the wire schema must match byte for byte, key order included.
    return json.dumps(value, ensure_ascii=False)


def test_packaged_entries_equal_the_seed_catalog() -> None:
    shared = json.loads(SEED_CATALOG.read_text(encoding="utf-8"))["tools"]
    packaged = _packaged_all()
    assert set(packaged) == {(p, n) for n, p in PACKAGES.items()} | PART_TWO | AGENT_BOUND
    for (package, name), value in packaged.items():
        [entry] = [t for t in shared if t["name"] == name and t["package"] == package]
        assert _dump(value) == _dump(entry), name


def test_every_tool_matches_its_catalog_entry(tmp_path: Path) -> None:
    packaged = _packaged()
    tools = default_tools(tmp_path, accepts_images=True, output_dir=tmp_path / "out")
    assert [t.name for t in tools] == [*PACKAGES, *ALWAYS]
    rt = ToolRuntime()
    for tool in tools:
        rt.register(tool)
    for schema in rt.schemas():
        entry = packaged[schema.name]
        description = str(entry["description"])
        assert schema.description == description, schema.name
        assert _dump(schema.parameters) == _dump(entry["parameters"]), schema.name


def test_read_image_only_when_the_model_takes_images(tmp_path: Path) -> None:
    names = [t.name for t in default_tools(tmp_path, output_dir=tmp_path / "out")]
    assert "read_image" not in names
    assert len(names) == len(PACKAGES) + len(ALWAYS) - 1


def test_todo_single_in_progress_description(tmp_path: Path) -> None:
    [todo] = [
        t
        for t in default_tools(tmp_path, allow_parallel_in_progress=False)
        if t.name == "todo_write"
    ]
    catalog = str(_packaged()["todo_write"]["description"])
    assert "several at once when work genuinely runs in parallel" in catalog
    assert "several at once" not in todo.description
    assert (
        "Keep AT MOST ONE todo `in_progress` at a time; while work remains, exactly one "
        "active task should be `in_progress`. Mark a todo `completed` the moment"
    ) in todo.description
    assert todo.description.startswith("Record and update a structured task list")


def test_env_prefix_and_caps_show_in_descriptions(tmp_path: Path) -> None:
    tools = {
        t.name: t
        for t in default_tools(
            tmp_path, env_prefix="HOST_", read_limit=50, grep_max_matches=10, glob_max_results=7
        )
    }
    assert "managed `$HOST_*` variables" in tools["bash"].description
    assert tools["read"].parameters["properties"]["limit"]["description"] == (
        "Maximum number of lines to return. Defaults to 50."
    )
    assert "Returns the first 10 matches inline" in tools["grep"].description
    assert "Up to 7 paths" in tools["glob"].description
    assert "returns 7 paths sampled" in tools["glob"].description


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("read_limit", 0),
        ("glob_max_results", -1),
        ("grep_max_matches", True),
        ("bash_timeout_ms", 0),
        ("editor_max_output_chars", 1.5),
    ],
)
def test_bad_options_are_rejected(tmp_path: Path, option: str, value: object) -> None:
    with pytest.raises(ValueError, match=option):
        default_tools(tmp_path, **{option: value})  # type: ignore[arg-type]


def test_bad_workspace_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a directory"):
        default_tools(tmp_path / "missing")
    with pytest.raises(ValueError, match="must not exceed"):
        default_tools(tmp_path, bash_timeout_ms=10, bash_max_timeout_ms=5)


def test_public_surface() -> None:
    import codemode.tools as tools

    assert tools.__all__ == sorted(tools.__all__)
    for name in tools.__all__:
        assert getattr(tools, name).__doc__, name
