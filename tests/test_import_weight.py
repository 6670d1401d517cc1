"""Which heavy third-party modules each entry point does NOT load at import (issue 24,
target 8: start-up). Deterministic: ``sys.modules`` of a fresh interpreter, no timing.

A heavy module here is one that costs a noticeable part of a start-up (``python -X
importtime``): the model SDK (openai ~240 ms, with pydantic and httpx: the agent's own model
client needs httpx alone, and only once a client is opened), the MCP SDK, rich's
Markdown and syntax highlighting (markdown-it, pygments), the CLI framework (typer, click,
rich), tree-sitter and PyYAML. Each loads where it is used, on first use."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SDKS = ("openai", "httpx", "pydantic", "mcp", "opentelemetry", "jedi")
RENDERING = ("pygments", "markdown_it", "rich.markdown", "rich.syntax")
CLI = ("typer", "click", "rich")
PARSERS = ("tree_sitter", "yaml", "RestrictedPython", "markdownify", "bs4")
RUNTIME = ("anyio", "asyncio", "msgspec", "sqlite3")
LAYERS = ("codemode.engine", "codemode.tools", "codemode.sandbox", "codemode.agent")


def loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


@pytest.mark.parametrize(
    ("statement", "absent"),
    [
        # The facade: every name loads on first access (nothing of the engine either).
        (
            "import codemode",
            (*SDKS, *RENDERING, *CLI, *PARSERS, *RUNTIME, *LAYERS),
        ),
        ("import codemode.engine", (*SDKS, *RENDERING, *CLI, *PARSERS)),
        # The SDK generator's renderers load on the first render of their language.
        (
            "import codemode.engine\ncodemode.engine.ToolRuntime",
            ("codemode.sdk_gen._py", "codemode.sdk_gen._ts", "codemode.sdk_gen._py_names"),
        ),
        ("import codemode.sandbox", (*SDKS, *RENDERING, *CLI, *PARSERS, "anyio")),
        (
            "import codemode.tools",
            (*SDKS, *RENDERING, *CLI, "tree_sitter", "RestrictedPython", "yaml"),
        ),
        # email.utils only parses a Retry-After date.
        ("import codemode.agent", (*SDKS, *RENDERING, *CLI, "RestrictedPython", "yaml", "email")),
        # An opened model client: httpx (which brings its own CLI's click, rich and pygments
        # when they are installed), never the openai SDK or pydantic.
        (
            "import anyio\n"
            "from codemode.agent import ModelClient, ModelConfig\n"
            "async def main():\n"
            "    async with ModelClient(ModelConfig('http://127.0.0.1:9/v1', 'm')):\n"
            "        pass\n"
            "anyio.run(main)",
            ("openai", "pydantic"),
        ),
        # The whole CLI application: the model and MCP SDKs load only in the commands that
        # talk to a model or serve MCP, rich (Markdown and highlighting too) only when drawn.
        ("import codemode.cli._app", (*SDKS, *RENDERING, "rich", "yaml")),
        # The console script answers --version before the application loads.
        (
            "import sys; sys.argv = ['codemode', '--version']\n"
            "import contextlib, io, codemode.cli\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    codemode.cli.main()",
            (*SDKS, *RENDERING, *CLI, *PARSERS, "codemode.cli._app", "codemode.engine"),
        ),
    ],
    ids=[
        "codemode",
        "engine",
        "engine-sdk-renderers",
        "sandbox",
        "tools",
        "agent",
        "agent-client",
        "cli-app",
        "cli-version",
    ],
)
def test_heavy_modules_are_not_imported(statement: str, absent: tuple[str, ...]) -> None:
    modules = loaded_after(statement)
    assert not modules & set(absent), sorted(modules & set(absent))


def test_the_probe_sees_what_is_imported() -> None:
    """The probe itself: a module that is imported is reported."""
    assert {"codemode.engine", "anyio", "msgspec"} <= loaded_after("import codemode.engine")
    assert "openai" in loaded_after("import openai")
