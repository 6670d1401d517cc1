"""Presentation cards: the seed's card vocabulary, soft validation and the presenter helpers."""

from __future__ import annotations

import logging
import math
from typing import Any

import pytest

from codemode.engine._presentation import (
    CALL_KINDS,
    present_call_card,
    present_result_card,
    validate_card,
)

# --- valid cards, as the catalog tools build them ----------------------

READ_CALL = {
    "card": "generic",
    "title": "Read src/app.py (10 - 29)",
    "kind": "read",
    "locations": [{"path": "src/app.py", "line": 10}],
}
GLOB_CALL = {
    "card": "generic",
    "title": "Glob **/*.py in src",
    "kind": "search",
    "rawInput": "**/*.py",
}
BACKGROUND_BASH_CALL = {
    "card": "generic",
    "title": "npm run dev",
    "kind": "execute",
    "rawInput": "npm run dev",
    "content": [{"type": "text", "text": "Start the dev server"}],
}
TODO_CALL = {
    "card": "generic",
    "title": "Update todo list",
    "kind": "other",
    "rawInput": [{"content": "write tests", "status": "pending"}],
}
BASH_CALL = {"card": "terminal", "title": "ls -la", "description": "List files", "cwd": "/repo"}
WRITE_CALL = {
    "card": "diff",
    "title": "Write notes.md",
    "diffs": [{"path": "notes.md", "oldText": None, "newText": "# Notes\n"}],
    "locations": [{"path": "notes.md"}],
}
EDIT_CALL = {
    "card": "diff",
    "title": "Edit a.py",
    "diffs": [{"path": "a.py", "oldText": "x = 1", "newText": "x = 2"}],
}

PLAN_RESULT = {"card": "generic", "title": "Plan review"}
BASH_RESULT = {"card": "terminal", "output": "total 0\n", "exitCode": 0}
KILLED_RESULT = {"card": "terminal", "title": "sleep 100", "output": "", "signal": "SIGTERM"}
EDIT_RESULT = {
    "card": "diff",
    "diffs": [{"path": "a.py", "oldText": "a\nx = 1\nb", "newText": "a\nx = 2\nb"}],
}
EMPTY_DIFF_RESULT = {"card": "diff", "diffs": []}
GREP_RESULT = {
    "card": "search",
    "shape": "matches",
    "files": [
        {"path": "src/a.py", "matches": [{"lineNumber": 3, "line": "import os"}]},
        {"path": "src/b.py", "matches": []},
    ],
    "truncated": False,
    "total": 1,
}
GLOB_RESULT = {
    "card": "search",
    "shape": "paths",
    "title": "Glob **/*.py",
    "paths": ["a.py", "b.py"],
    "truncated": True,
    "total": 240,
}
READ_RESULT = {
    "card": "read",
    "path": "src/app.py",
    "offset": 10,
    "lines": [{"number": 10, "text": "def main():"}, {"number": 11, "text": "    pass"}],
    "totalLines": 120,
    "lang": "py",
    "content": [{"type": "text", "text": "def main():\n    pass"}],
}
EMPTY_READ_RESULT = {"card": "read", "path": "x.txt", "offset": 5, "lines": [], "totalLines": 3}
WEB_SEARCH_RESULT = {
    "card": "web",
    "kind": "search",
    "sources": [
        {"url": "https://a.example", "title": "A", "snippet": "s", "publishedAt": "2026-01-01"},
        {"url": "https://b.example"},
    ],
    "answer": "42",
    "truncated": False,
}
WEB_FETCH_RESULT = {
    "card": "web",
    "kind": "fetch",
    "url": "https://a.example/page",
    "statusCode": 200,
    "truncated": True,
}

CALL_CARDS = [
    READ_CALL,
    GLOB_CALL,
    BACKGROUND_BASH_CALL,
    TODO_CALL,
    BASH_CALL,
    WRITE_CALL,
    EDIT_CALL,
]
RESULT_CARDS = [
    PLAN_RESULT,
    BASH_RESULT,
    KILLED_RESULT,
    EDIT_RESULT,
    EMPTY_DIFF_RESULT,
    GREP_RESULT,
    GLOB_RESULT,
    READ_RESULT,
    EMPTY_READ_RESULT,
    WEB_SEARCH_RESULT,
    WEB_FETCH_RESULT,
    BACKGROUND_BASH_CALL | {"title": "done"},  # a generic result may carry content
]


@pytest.mark.parametrize("card", CALL_CARDS, ids=lambda c: f"{c['card']}:{c['title']}")
def test_valid_call_cards_pass_unchanged(card: dict[str, Any]) -> None:
    assert validate_card(card, phase="call") == card
    assert validate_card(card) == card


@pytest.mark.parametrize("card", RESULT_CARDS[:-1], ids=lambda c: c["card"])
def test_valid_result_cards_pass_unchanged(card: dict[str, Any]) -> None:
    assert validate_card(card, phase="result") == card
    assert validate_card(card) == card


@pytest.mark.parametrize("kind", CALL_KINDS)
def test_every_call_kind_is_accepted(kind: str) -> None:
    assert validate_card({"card": "generic", "title": "t", "kind": kind}) is not None


def test_validated_cards_are_fresh_plain_dicts_with_card_first() -> None:
    card = {"title": "Write notes.md", "diffs": WRITE_CALL["diffs"], "card": "diff"}
    out = validate_card(card)
    assert out == {"card": "diff", "title": "Write notes.md", "diffs": WRITE_CALL["diffs"]}
    assert out is not None
    assert list(out) == ["card", "title", "diffs"]
    out["diffs"][0]["newText"] = "changed"
    assert WRITE_CALL["diffs"][0]["newText"] == "# Notes\n"  # type: ignore[index]


# --- normalisation ------------------------------------------------------------------------


def test_unknown_keys_are_dropped() -> None:
    card = {"card": "terminal", "title": "ls", "cwd": "/", "color": "red", "exitCode": 0}
    # A pending terminal card has no exit status; the result-only key is dropped too.
    assert validate_card(card, phase="call") == {"card": "terminal", "title": "ls", "cwd": "/"}
    assert validate_card(card, phase="result") == {"card": "terminal", "title": "ls", "exitCode": 0}
    assert validate_card(card) == {"card": "terminal", "title": "ls", "cwd": "/", "exitCode": 0}


def test_none_on_an_optional_field_means_absent() -> None:
    card = {"card": "generic", "title": "t", "kind": None, "locations": None, "content": None}
    assert validate_card(card) == {"card": "generic", "title": "t"}
    terminal = {"card": "terminal", "title": "ls", "description": None, "cwd": None}
    assert validate_card(terminal, phase="call") == {"card": "terminal", "title": "ls"}
    location = {"card": "generic", "title": "t", "locations": [{"path": "a", "line": None}]}
    assert validate_card(location) == {
        "card": "generic",
        "title": "t",
        "locations": [{"path": "a"}],
    }


def test_raw_input_null_is_kept_as_a_value() -> None:
    assert validate_card({"card": "generic", "title": "t", "rawInput": None}) == {
        "card": "generic",
        "title": "t",
        "rawInput": None,
    }


def test_missing_old_text_becomes_null() -> None:
    card = {"card": "diff", "title": "create a.txt", "diffs": [{"path": "a.txt", "newText": ""}]}
    assert validate_card(card) == {
        "card": "diff",
        "title": "create a.txt",
        "diffs": [{"path": "a.txt", "oldText": None, "newText": ""}],
    }


# --- phases ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "card", [GREP_RESULT, GLOB_RESULT, READ_RESULT, WEB_SEARCH_RESULT, WEB_FETCH_RESULT]
)
def test_result_only_cards_are_not_call_cards(card: dict[str, Any]) -> None:
    assert validate_card(card, phase="call") is None


@pytest.mark.parametrize("card_type", ["generic", "terminal", "diff"])
def test_call_cards_need_a_title_but_result_cards_do_not(card_type: str) -> None:
    card: dict[str, Any] = {"card": card_type}
    if card_type == "diff":
        card["diffs"] = []
    assert validate_card(card, phase="call") is None
    assert validate_card(card, phase="result") == card
    assert validate_card(card) == card


def test_generic_result_drops_call_only_fields() -> None:
    assert validate_card(READ_CALL, phase="result") == {
        "card": "generic",
        "title": "Read src/app.py (10 - 29)",
    }


# --- invalid cards ---------------------------------------------------------------------------

INVALID = [
    None,
    "generic",
    ["card", "generic"],
    {},
    {"card": "fancy", "title": "t"},
    {"card": 1, "title": "t"},
    # generic
    {"card": "generic", "title": 3},
    {"card": "generic", "title": "t", "kind": "write"},
    {"card": "generic", "title": "t", "rawInput": math.inf},
    {"card": "generic", "title": "t", "rawInput": {1: "a"}},
    {"card": "generic", "title": "t", "content": "text"},
    {"card": "generic", "title": "t", "content": [{"text": "no type"}]},
    {"card": "generic", "title": "t", "content": [{"type": "text"}]},
    {"card": "generic", "title": "t", "content": [{"type": "text", "text": 1}]},
    {"card": "generic", "title": "t", "locations": {"path": "a"}},
    {"card": "generic", "title": "t", "locations": [{"line": 1}]},
    {"card": "generic", "title": "t", "locations": [{"path": ""}]},
    {"card": "generic", "title": "t", "locations": [{"path": "a", "line": 0}]},
    {"card": "generic", "title": "t", "locations": [{"path": "a", "line": 1.5}]},
    {"card": "generic", "title": "t", "locations": [{"path": "a", "line": True}]},
    # terminal
    {"card": "terminal", "title": "t", "cwd": 7},
    {"card": "terminal", "output": "x", "exitCode": "0"},
    {"card": "terminal", "output": "x", "exitCode": False},
    {"card": "terminal", "exitCode": 1, "signal": "SIGKILL"},
    # diff
    {"card": "diff", "title": "t"},
    {"card": "diff", "title": "t", "diffs": [{"path": "a"}]},
    {"card": "diff", "title": "t", "diffs": [{"path": "a", "newText": None}]},
    {"card": "diff", "title": "t", "diffs": [{"path": "a", "oldText": 1, "newText": ""}]},
    {"card": "diff", "title": "t", "diffs": [{"newText": ""}]},
    # search
    {"card": "search", "paths": [], "truncated": False, "total": 0},
    {"card": "search", "shape": "tree", "truncated": False, "total": 0},
    {"card": "search", "shape": "paths", "paths": [], "total": 0},
    {"card": "search", "shape": "paths", "paths": [], "truncated": 0, "total": 0},
    {"card": "search", "shape": "paths", "paths": [], "truncated": False, "total": -1},
    {"card": "search", "shape": "paths", "paths": [1], "truncated": False, "total": 1},
    {"card": "search", "shape": "matches", "paths": [], "truncated": False, "total": 0},
    {
        "card": "search",
        "shape": "matches",
        "files": [{"path": "a", "matches": [{"lineNumber": 0, "line": "x"}]}],
        "truncated": False,
        "total": 1,
    },
    # read
    {"card": "read", "offset": 1, "lines": [], "totalLines": 0},
    {"card": "read", "path": "a", "offset": 0, "lines": [], "totalLines": 0},
    {"card": "read", "path": "a", "offset": 1, "lines": [{"number": 1}], "totalLines": 1},
    {"card": "read", "path": "a", "offset": 1, "lines": [], "totalLines": -1},
    {"card": "read", "path": "a", "offset": 1, "lines": [], "totalLines": 0, "lang": 1},
    # web
    {"card": "web", "sources": [], "truncated": False},
    {"card": "web", "kind": "search", "sources": [{"title": "no url"}], "truncated": False},
    {"card": "web", "kind": "search", "sources": [], "truncated": "no"},
    {"card": "web", "kind": "fetch", "url": "https://a", "truncated": False},
    {"card": "web", "kind": "fetch", "url": "https://a", "statusCode": 200.5, "truncated": False},
    {"card": "web", "kind": "read", "url": "https://a", "statusCode": 200, "truncated": False},
]


@pytest.mark.parametrize("card", INVALID, ids=repr)
def test_invalid_cards_return_none(card: Any) -> None:
    assert validate_card(card) is None
    assert validate_card(card, phase="call") is None


def test_result_phase_ignores_malformed_call_only_keys() -> None:
    # A completed generic card has no kind/locations and a completed terminal card no
    # cwd: those keys are outside the result vocabulary, so they are dropped unchecked.
    generic = {"card": "generic", "title": "t", "kind": "write", "locations": [{"line": 0}]}
    assert validate_card(generic, phase="result") == {"card": "generic", "title": "t"}
    terminal = {"card": "terminal", "cwd": 7, "exitCode": 2}
    assert validate_card(terminal, phase="result") == {"card": "terminal", "exitCode": 2}
    assert validate_card(generic) is None
    assert validate_card(terminal) is None


def test_validate_card_never_raises_on_hostile_values() -> None:
    class Weird(dict[str, Any]):
        def get(self, *_a: Any, **_k: Any) -> Any:
            raise RuntimeError("boom")

    cyclic: dict[str, Any] = {"card": "generic", "title": "t"}
    cyclic["rawInput"] = cyclic
    assert validate_card(Weird(card="generic", title="t")) is None
    assert validate_card(cyclic) is None
    assert validate_card({"card": "generic", "title": "t"}, phase="bogus") is None  # type: ignore[arg-type]


# --- presenter helpers -----------------------------------------------------------------------


def test_present_call_card_runs_the_presenter_and_validates() -> None:
    def present_call(args: Any) -> dict[str, Any]:
        return {"card": "terminal", "title": args["command"], "cwd": args.get("workdir")}

    assert present_call_card(present_call, {"command": "ls"}) == {"card": "terminal", "title": "ls"}


def test_present_call_card_without_a_presenter_or_when_it_declines() -> None:
    assert present_call_card(None, {}) is None
    assert present_call_card(lambda args: None, {}) is None


def test_present_call_card_rejects_result_cards() -> None:
    assert present_call_card(lambda args: GLOB_RESULT, {}) is None


def test_raising_presenter_falls_back_and_logs_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    def present_call(args: Any) -> Any:
        raise KeyError("command")

    with caplog.at_level(logging.DEBUG, logger="codemode.engine._presentation"):
        assert present_call_card(present_call, {}) is None
    assert [r.levelno for r in caplog.records] == [logging.DEBUG]
    assert "present_call raised" in caplog.records[0].getMessage()


def test_garbage_from_a_presenter_falls_back_and_logs_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="codemode.engine._presentation"):
        assert present_result_card(lambda args, view: {"card": "nope"}, {}, {}) is None
        assert present_result_card(lambda args, view: 42, {}, {}) is None
    assert len(caplog.records) == 2
    assert all("invalid card" in r.getMessage() for r in caplog.records)


def test_async_presenter_is_refused_without_a_never_awaited_warning() -> None:
    async def present_call(args: Any) -> dict[str, Any]:
        return BASH_CALL

    # filterwarnings=error would turn a "coroutine was never awaited" warning into a failure.
    assert present_call_card(present_call, {}) is None


def test_present_result_card_passes_args_and_the_result_view() -> None:
    seen: list[Any] = []

    def present_result(args: Any, view: Any) -> dict[str, Any] | None:
        seen.append((args, view))
        if view["isError"] or not isinstance(view.get("meta"), dict):
            return None
        return {"card": "read", **view["meta"], "content": view["content"]}

    meta = {"path": "a.py", "offset": 1, "lines": [{"number": 1, "text": "x"}], "totalLines": 1}
    view = {"content": [{"type": "text", "text": "x"}], "isError": False, "meta": meta}
    assert present_result_card(present_result, {"file_path": "a.py"}, view) == {
        "card": "read",
        "path": "a.py",
        "offset": 1,
        "lines": [{"number": 1, "text": "x"}],
        "totalLines": 1,
        "content": [{"type": "text", "text": "x"}],
    }
    assert seen == [({"file_path": "a.py"}, view)]
    failed = {"content": [{"type": "text", "text": "Error: nope"}], "isError": True}
    assert present_result_card(present_result, {}, failed) is None
    assert present_result_card(None, {}, view) is None


def test_presenter_base_exceptions_are_not_swallowed() -> None:
    def present_call(args: Any) -> Any:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        present_call_card(present_call, {})


# --- wired in: the native scheduler's session events store the cards ------------------


@pytest.mark.anyio
async def test_session_events_store_the_tools_cards_and_skip_failing_presenters() -> None:
    import json as _json

    from codemode.engine import (
        AbortController,
        MemorySessionLog,
        ToolOutput,
        ToolRuntime,
        define_tool,
        text,
    )
    from codemode.engine.scheduling import ModelToolCall, run_tool_calls

    async def echo(args: Any, _ctx: Any) -> Any:
        return args["word"]

    def shout(args: Any) -> Any:
        return {"card": "terminal", "title": f"echo {args['word']}", "cwd": "/w"}

    def outcome(_args: Any, result: Any) -> Any:
        body = result["content"][0]["text"]
        return {"card": "terminal", "output": body, "exitCode": 0}

    def broken(_args: Any) -> Any:
        raise RuntimeError("presenter bug")

    output = ToolOutput(schema={"type": "string"}, render=lambda _a, v: [text(v)])
    rt = ToolRuntime()
    for name, call_p, result_p in [("echo", shout, outcome), ("bad", broken, None)]:
        rt.register(
            define_tool(
                name=name,
                description=name,
                parameters={"word": {"type": "string"}},
                output=output,
                execute=echo,
                present_call=call_p,
                present_result=result_p,
            )
        )
    log = MemorySessionLog()
    agent = rt.scope("agent", session=log)
    calls = [
        ModelToolCall("a", "echo", _json.dumps({"word": "hi"})),
        ModelToolCall("b", "bad", _json.dumps({"word": "x"})),
    ]
    results = await run_tool_calls(rt, calls, signal=AbortController().signal, agent=agent)
    assert [r.is_error for r in results] == [False, False]
    by = {(e["type"], e["callId"]): e for e in log.events}
    assert by["tool/call", "a"]["callCard"] == {"card": "terminal", "title": "echo hi", "cwd": "/w"}
    assert by["tool/result", "a"]["resultCard"] == {
        "card": "terminal",
        "output": "hi",
        "exitCode": 0,
    }
    # A raising presenter (or none) yields no card, and the call still succeeds and logs.
    assert "callCard" not in by["tool/call", "b"]
    assert "resultCard" not in by["tool/result", "b"]
