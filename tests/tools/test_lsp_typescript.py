"""The ``lsp`` tool against the real ``typescript-language-server`` (installed next to the
venv's interpreter by ``make install``, from npm, pinned in the Makefile)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from codemode.engine import (
    AbortController,
    MemorySessionLog,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRuntime,
)
from codemode.engine.policies import LocalSpillStore
from codemode.tools._config import ToolsConfig
from codemode.tools.fs._paths import Workspace
from codemode.tools.lsp import LspManager, build_lsp_tool, default_servers
from codemode.tools.lsp._providers import find_executable

pytestmark = pytest.mark.anyio

SHAPES_TS = """export interface Shape {
  area(): number;
}

export class Square implements Shape {
  constructor(private side: number) {}
  area(): number {
    return this.side * this.side;
  }
}
"""
MAIN_TS = """import { Square, Shape } from "./shapes";

const s: Shape = new Square(3);
console.log(s.area());
"""


class Ts:
    def __init__(self, ws: Path, tmp_path: Path, manager: LspManager) -> None:
        cfg = ToolsConfig(
            workspace=Workspace(ws),
            spill_store=LocalSpillStore(str(tmp_path / "out" / "spill")),
            output_dir=str(tmp_path / "out"),
        )
        self.rt = ToolRuntime()
        self.rt.register(build_lsp_tool(cfg, manager))
        self.agent = self.rt.scope("agent", session=MemorySessionLog())
        self.ws = ws.resolve()

    async def call(self, **args: Any) -> ToolExecutionResult:
        return await self.rt.execute(
            ToolExecutionInput(
                call_id="c1",
                name="lsp",
                arguments=args,
                signal=AbortController().signal,
                agent=self.agent,
            )
        )

    async def ok(self, **args: Any) -> tuple[Any, str]:
        result = await self.call(**args)
        assert not result.is_error, result.to_json()
        block = result.content[0]
        return result.value, str(block["text"])


@pytest.fixture
async def ts(tmp_path: Path) -> AsyncIterator[Ts]:
    assert find_executable("typescript-language-server"), (
        "typescript-language-server is not installed next to the interpreter: run `make "
        "install` (it installs the pinned server from npm into the venv)"
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "shapes.ts").write_text(SHAPES_TS, encoding="utf-8")
    (ws / "main.ts").write_text(MAIN_TS, encoding="utf-8")
    (ws / "tsconfig.json").write_text('{"compilerOptions": {"strict": true}}', encoding="utf-8")
    async with LspManager(default_servers(), request_timeout_s=30, shutdown_grace_s=0.5) as m:
        yield Ts(ws, tmp_path, m)


def _starts(value: Any) -> list[tuple[str, int, int]]:
    return [
        (
            Path(loc["uri"].removeprefix("file://")).name,
            loc["range"]["start"]["line"],
            loc["range"]["start"]["character"],
        )
        for loc in value["locations"]
    ]


async def test_definition_references_hover_and_implementation(ts: Ts) -> None:
    # `Square` in `new Square(3)` (one-based line 3, column 22): the class and its
    # constructor in shapes.ts — not the import binding, which is all tsserver knows before
    # its project has loaded (the client waits for that after a file's first open).
    value, rendered = await ts.ok(
        operation="goToDefinition", file_path="main.ts", line=3, character=22
    )
    assert value["kind"] == "locations"
    assert _starts(value) == [("shapes.ts", 4, 13), ("shapes.ts", 5, 2)]
    assert rendered == "shapes.ts:5:14\nshapes.ts:6:3"

    value, rendered = await ts.ok(
        operation="findReferences", file_path="shapes.ts", line=5, character=14
    )
    assert sorted(_starts(value)) == [
        ("main.ts", 0, 9),
        ("main.ts", 2, 21),
        ("shapes.ts", 4, 13),
    ]
    assert "main.ts:1:10" in rendered and "shapes.ts:5:14" in rendered

    value, rendered = await ts.ok(operation="hover", file_path="main.ts", line=4, character=15)
    assert value["kind"] == "hover"
    assert "area(): number" in rendered

    # The interface's method is implemented by Square.area.
    value, rendered = await ts.ok(
        operation="goToImplementation", file_path="shapes.ts", line=2, character=3
    )
    assert ("shapes.ts", 6, 2) in _starts(value)
    assert value["resolvedWorkspaceUri"] == ts.ws.as_uri()
