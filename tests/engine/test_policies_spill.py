"""SpillPolicy arm 1 (top-level results) with a real LocalSpillStore (reference §2.9)."""

from __future__ import annotations

import logging
import math
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from pipeline_support import call, echo_tool, error_text

from codemode.engine import (
    Accept,
    Block,
    MemorySessionLog,
    ToolExecutionSuccess,
    ToolOutput,
    ToolRuntime,
    text,
)
from codemode.engine.policies import LocalSpillStore, SpillPolicy

HINT = "Use read with offset/limit, or grep this path to search within it."
BODY = "".join(f"{i:04d}" for i in range(500))  # 2,000 ASCII bytes, position-revealing
LOCATOR = re.compile(r"Full formatted result stored at: (.+?)\. Use read")


def expected_replacement(full: str, cap: int, locator: str) -> str:
    """The reference's arithmetic, written out independently for ASCII text."""
    worst = f"(Omitted {len(full)} bytes. Full formatted result stored at: {locator}. {HINT})"
    budget = cap - (len(worst) + 2)
    head_n, tail_n = math.ceil(budget / 2), math.floor(budget / 2)
    head, tail = full[:head_n], full[len(full) - tail_n :]
    omitted = len(full) - head_n - tail_n
    notice = f"(Omitted {omitted} bytes. Full formatted result stored at: {locator}. {HINT})"
    return f"{head}{tail}\n\n{notice}"


def _setup(
    tmp_path: Path,
    cap: int = 400,
    value: str = BODY,
    name: str = "big",
    store: Any = None,
) -> tuple[ToolRuntime, Any]:
    rt = ToolRuntime()

    async def body(_args: Any, _exec: Any) -> Any:
        return value

    rt.register(echo_tool(name, body=body))
    spill_store = LocalSpillStore(tmp_path / "spill") if store is None else store
    SpillPolicy(spill_store, max_inline_bytes=cap).install(rt)
    agent = rt.scope("agent", session=MemorySessionLog())
    return rt, agent


def _text(result: Any) -> str:
    return "".join(block["text"] for block in result.content)


@pytest.mark.anyio
async def test_oversized_text_is_spilled_with_the_exact_notice(tmp_path: Path) -> None:
    rt, agent = _setup(tmp_path, cap=400)
    result = await rt.execute(call("big", agent=agent))
    assert isinstance(result, ToolExecutionSuccess)
    assert result.value == BODY  # the canonical value is never touched
    assert len(result.content) == 1
    replaced = _text(result)
    locator = LOCATOR.search(replaced).group(1)  # type: ignore[union-attr]
    assert replaced == expected_replacement(BODY, 400, locator)
    assert len(replaced.encode()) <= 400
    saved = Path(locator)
    assert saved.is_absolute() and saved.parent == (tmp_path / "spill").resolve()
    assert saved.name.endswith("-big.txt")
    assert await anyio.Path(saved).read_text(encoding="utf-8") == BODY


@pytest.mark.anyio
async def test_multi_block_text_is_joined_without_separator(tmp_path: Path) -> None:
    rt = ToolRuntime()

    async def body(_args: Any, _exec: Any) -> Any:
        return "x"

    halves = [text(BODY[:1000]), text(BODY[1000:])]
    rt.register(
        echo_tool(
            "blocks",
            body=body,
            output=ToolOutput(schema={"type": "string"}, render=lambda _a, _v: halves),
        )
    )
    SpillPolicy(LocalSpillStore(tmp_path), max_inline_bytes=500).install(rt)
    agent = rt.scope("agent")
    result = await rt.execute(call("blocks", agent=agent))
    locator = LOCATOR.search(_text(result)).group(1)  # type: ignore[union-attr]
    assert _text(result) == expected_replacement(BODY, 500, locator)
    assert await anyio.Path(locator).read_text(encoding="utf-8") == BODY


@pytest.mark.anyio
@pytest.mark.parametrize("cap", [2000, 5000])
async def test_results_within_the_cap_are_untouched(tmp_path: Path, cap: int) -> None:
    rt, agent = _setup(tmp_path, cap=cap)
    result = await rt.execute(call("big", agent=agent))
    assert result.content == [text(BODY)]
    assert not (tmp_path / "spill").exists()


@pytest.mark.anyio
async def test_read_and_nested_calls_are_excluded(tmp_path: Path) -> None:
    rt, agent = _setup(tmp_path, name="read")
    assert (await rt.execute(call("read", agent=agent))).content == [text(BODY)]
    rt2, agent2 = _setup(tmp_path, name="big")
    nested = await rt2.execute(call("big", agent=agent2, parent=object()))
    assert nested.content == [text(BODY)]
    assert not (tmp_path / "spill").exists()


@pytest.mark.anyio
async def test_only_plain_accept_decisions_are_bounded(tmp_path: Path) -> None:
    rt, agent = _setup(tmp_path)

    async def replace_value(_exec: Any, _result: Any, _next: Any) -> Any:
        return Accept(value=BODY[::-1])

    off = rt.on("tools/post-execute", replace_value)
    result = await rt.execute(call("big", agent=agent))
    assert result.content == [text(BODY[::-1])]
    off()

    async def block(_exec: Any, _result: Any, _next: Any) -> Any:
        return Block([text(BODY)])

    off = rt.on("tools/post-execute", block)
    result = await rt.execute(call("big", agent=agent))
    assert error_text(result)[0] == BODY
    off()
    assert not (tmp_path / "spill").exists()


@pytest.mark.anyio
async def test_a_content_replacement_from_an_inner_listener_is_bounded(tmp_path: Path) -> None:
    rt, agent = _setup(tmp_path, value="small")

    async def inflate(_exec: Any, _result: Any, _next: Any) -> Any:
        return Accept(content=[text(BODY)], additional_contexts=({"role": "user", "content": []},))

    rt.on("tools/post-execute", inflate)  # the spill arm is prepended: it runs outside
    result = await rt.execute(call("big", agent=agent))
    locator = LOCATOR.search(_text(result)).group(1)  # type: ignore[union-attr]
    assert _text(result) == expected_replacement(BODY, 400, locator)
    assert result.value == "small"
    assert list(result.additional_contexts) == [{"role": "user", "content": []}]


@pytest.mark.anyio
async def test_non_text_content_is_not_spilled(tmp_path: Path) -> None:
    rt = ToolRuntime()

    async def body(_args: Any, _exec: Any) -> Any:
        return "x"

    blocks = [text(BODY), {"type": "image", "data": "AAAA", "mimeType": "image/png"}]
    rt.register(
        echo_tool(
            "img",
            body=body,
            output=ToolOutput(schema={"type": "string"}, render=lambda _a, _v: blocks),
        )
    )
    SpillPolicy(LocalSpillStore(tmp_path), max_inline_bytes=100).install(rt)
    result = await rt.execute(call("img", agent=rt.scope("agent")))
    assert result.content == blocks


@pytest.mark.anyio
async def test_an_accepted_failure_is_bounded_like_any_text_result(tmp_path: Path) -> None:
    # The reference checks the decision (accept), not the result's isError.
    rt = ToolRuntime()

    async def body(_args: Any, _exec: Any) -> Any:
        raise RuntimeError(BODY)

    rt.register(echo_tool("bad", body=body))
    SpillPolicy(LocalSpillStore(tmp_path / "spill"), max_inline_bytes=400).install(rt)
    result = await rt.execute(call("bad", agent=rt.scope("agent")))
    assert result.is_error
    assert error_text(result)[0] == BODY  # the message is untouched
    locator = LOCATOR.search(_text(result)).group(1)  # type: ignore[union-attr]
    assert _text(result) == expected_replacement(f"Error: {BODY}", 400, locator)
    assert await anyio.Path(locator).read_text(encoding="utf-8") == f"Error: {BODY}"


@pytest.mark.anyio
async def test_a_save_error_keeps_the_original_and_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class FailingStore:
        retrieval_hint = HINT

        async def save(self, text: str, **_kw: Any) -> str:
            raise OSError("disk full")

    rt, agent = _setup(tmp_path, store=FailingStore())
    with caplog.at_level(logging.WARNING):
        result = await rt.execute(call("big", agent=agent))
    assert result.content == [text(BODY)]
    assert any("disk full" in r.getMessage() for r in caplog.records)


@pytest.mark.anyio
async def test_missing_store_or_agent_keeps_the_original(tmp_path: Path) -> None:
    rt = ToolRuntime()

    async def body(_args: Any, _exec: Any) -> Any:
        return BODY

    rt.register(echo_tool("big", body=body))
    SpillPolicy(None, max_inline_bytes=100).install(rt)
    assert (await rt.execute(call("big", agent=rt.scope("a")))).content == [text(BODY)]
    rt2, _ = _setup(tmp_path)
    # No agent means no session owner for the spill file.
    assert (await rt2.execute(call("big"))).content == [text(BODY)]


@pytest.mark.anyio
async def test_a_replacement_that_cannot_fit_keeps_the_original(tmp_path: Path) -> None:
    rt, agent = _setup(tmp_path, cap=10)
    result = await rt.execute(call("big", agent=agent))
    assert result.content == [text(BODY)]


@pytest.mark.anyio
async def test_install_returns_a_disposer_and_none_means_off(tmp_path: Path) -> None:
    rt, agent = _setup(tmp_path)
    assert "Omitted" in _text(await rt.execute(call("big", agent=agent)))
    rt2 = ToolRuntime()

    async def body(_args: Any, _exec: Any) -> Any:
        return BODY

    rt2.register(echo_tool("big", body=body))
    dispose = SpillPolicy(LocalSpillStore(tmp_path), max_inline_bytes=100).install(rt2)
    dispose()
    assert (await rt2.execute(call("big", agent=rt2.scope("a")))).content == [text(BODY)]
    off = SpillPolicy(LocalSpillStore(tmp_path)).install(rt2)
    off()


@pytest.mark.parametrize("bad", [-1, 1.5, True, "100"])
def test_max_inline_bytes_must_be_a_non_negative_integer(bad: Any) -> None:
    with pytest.raises(ValueError) as excinfo:
        SpillPolicy(None, max_inline_bytes=bad)
    assert str(excinfo.value) == "SpillPolicy(max_inline_bytes=...) must be a non-negative integer"
    SpillPolicy(None, max_inline_bytes=0)


@pytest.mark.anyio
async def test_agent_less_calls_warn_and_keep_the_original(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rt, _ = _setup(tmp_path)
    with caplog.at_level(logging.WARNING):
        result = await rt.execute(call("big"))
    assert result.content == [text(BODY)]
    assert any("no session owner for big result" in r.getMessage() for r in caplog.records)


@pytest.mark.anyio
async def test_accept_content_none_means_keep_and_is_still_bounded(tmp_path: Path) -> None:
    rt, agent = _setup(tmp_path)

    async def keep(_exec: Any, _result: Any, _next: Any) -> Any:
        return Accept(content=None)

    rt.on("tools/post-execute", keep)
    result = await rt.execute(call("big", agent=agent))
    assert result.is_error is False
    locator = LOCATOR.search(_text(result)).group(1)  # type: ignore[union-attr]
    assert _text(result) == expected_replacement(BODY, 400, locator)


# --- arm 2: the durable copy of run_code sub-results ------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("tool_name", ["big", "read"])
async def test_dispatch_log_copies_are_bounded_but_the_program_gets_everything(
    tmp_path: Path, tool_name: str
) -> None:
    from codemode.engine.testing import InProcessRuntime

    received: list[Any] = []

    async def program(tools: Any, _print: Any) -> Any:
        received.append(await tools[tool_name]({"value": "x"}))
        return "done"

    rt = ToolRuntime(mode="code", code_runtime=InProcessRuntime(program))

    async def body(_args: Any, _exec: Any) -> Any:
        return BODY

    rt.register(echo_tool(tool_name, body=body))
    log = MemorySessionLog()
    agent = rt.scope("agent", session=log)
    SpillPolicy(LocalSpillStore(tmp_path / "spill"), max_inline_bytes=400).install(rt)
    result = await rt.execute(
        call("run_code", arguments={"code": "p", "description": "d"}, agent=agent, call_id="outer")
    )
    assert not result.is_error, result
    assert received == [BODY]  # the program's value is never touched
    (settled,) = [e for e in log.events if e["type"] == "tool/code-dispatch"]
    assert settled["subCallId"] == "outer:code:1"
    logged = "".join(b["text"] for b in settled["content"])
    locator = LOCATOR.search(logged).group(1)  # type: ignore[union-attr]
    assert logged == expected_replacement(BODY, 400, locator)
    assert await anyio.Path(locator).read_text(encoding="utf-8") == BODY


@pytest.mark.anyio
async def test_the_dispatch_log_arm_is_prepended(tmp_path: Path) -> None:
    from codemode.engine.testing import InProcessRuntime

    async def program(tools: Any, _print: Any) -> Any:
        return await tools.small({"value": "x"})

    rt = ToolRuntime(mode="code", code_runtime=InProcessRuntime(program))
    rt.register(echo_tool("small"))

    async def inflate(_dispatch: Any, _next: Any) -> Any:
        return [text(BODY)]

    rt.on("tools/code-dispatch-log", inflate)  # registered first, still inside the spill arm
    SpillPolicy(LocalSpillStore(tmp_path), max_inline_bytes=400).install(rt)
    log = MemorySessionLog()
    agent = rt.scope("agent", session=log)
    await rt.execute(call("run_code", arguments={"code": "p", "description": "d"}, agent=agent))
    (settled,) = [e for e in log.events if e["type"] == "tool/code-dispatch"]
    logged = "".join(b["text"] for b in settled["content"])
    assert "Omitted" in logged and len(logged.encode()) <= 400
