"""Measure the generated SDK against the native tool schemas for the same tools.

Three catalogs:

- ``upstream``: the two MCP servers of the test suite
  (``tests/integrations/mcp/upstream_server.py notes|tasks``, pydantic-generated schemas
  with ``$defs``), imported over stdio exactly as ``codemode serve-mcp`` does;
- ``builtin``: codemode's built-in tools (hand-written, richly described schemas);
- ``large``: the built-in tools repeated under 12 prefixes (132 tools), past the
  default 40,000-character budget, so ``run_code`` carries the compact index. Every
  description in a copy's schemas is tagged with its prefix: the SDK declares a type
  shared by identical schemas once, and copies that were identical would flatter it.

For each: the native size (the JSON tool list a native client sends: MCP
``name``/``description``/``inputSchema``, once without and once with ``outputSchema``),
the SDK section in Python and TypeScript, and ``run_code``'s full MCP description (what
serve-mcp lists: flavour text + SDK, or + compact index). Characters always; tokens with
an OpenAI BPE when one loads offline (``tiktoken`` downloads its vocabulary on first use,
so it is tried first and usually fails here; ``bpe-openai`` ships its vocabularies).

Run: ``python benchmarks/bench_mcp_sdk.py``.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from codemode.engine import ToolDefinition, ToolOutput, ToolRuntime
from codemode.engine.json import thaw
from codemode.integrations.mcp import CodeModeServer, Upstream, connect_upstreams
from codemode.tools import default_tools

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "integrations" / "mcp" / "upstream_server.py"


def tokenizer() -> tuple[str, Callable[[str], int]] | None:
    try:
        import tiktoken

        enc = tiktoken.get_encoding("o200k_base")
        return "tiktoken o200k_base", lambda s: len(enc.encode(s))
    except Exception:
        pass
    try:
        import bpe_openai

        enc2 = bpe_openai.get_encoding("o200k_base")
        return "bpe-openai o200k_base", lambda s: len(enc2.encode(s))
    except Exception:
        return None


class _FakeRuntime:
    """A code runtime stand-in that only names its language: the SDK and run_code's
    description are rendered without starting a sandbox (nothing runs here)."""

    def __init__(self, language: str) -> None:
        self.language = language

    def sdk_facts(self) -> dict[str, Any]:
        return {}


def measure(
    label: str, definitions: list[ToolDefinition], native: list[dict[str, Any]], count: Any
) -> None:
    native_in = json.dumps(
        [{k: v for k, v in t.items() if k != "outputSchema"} for t in native], ensure_ascii=False
    )
    native_full = json.dumps(native, ensure_ascii=False)
    rows = [("native inputSchema", native_in), ("native + outputSchema", native_full)]
    for language in ("python", "typescript"):
        rt = ToolRuntime(mode="code", code_runtime=_FakeRuntime(language))
        for d in definitions:
            rt.register(d)
        sdk = rt.system_prompt_sections()["tools:sdk"]
        rows.append((f"SDK {language}", sdk))
        server = CodeModeServer(rt)
        rows.append(
            (
                f"run_code description {language}" + (" (compact index)" if server.compact else ""),
                server.run_code_description(),
            )
        )
    print(f"\n{label}: {len(definitions)} tools")
    for name, body in rows:
        tokens = f"{count(body):>8,} tokens" if count else ""
        print(f"  {name:<48} {len(body):>9,} chars {tokens}")


def _tagged(schema: Any, tag: str) -> Any:
    if isinstance(schema, dict):
        out = {k: _tagged(v, tag) for k, v in schema.items() if k != "description"}
        if isinstance(schema.get("description"), str):
            out["description"] = f"{schema['description']} [{tag}]"
        if isinstance(schema.get("properties"), dict):
            out["properties"] = {k: _tagged(v, tag) for k, v in schema["properties"].items()}
        return out
    if isinstance(schema, list):
        return [_tagged(v, tag) for v in schema]
    return schema


def builtin_definitions(workspace: Path, prefix: str = "") -> list[ToolDefinition]:
    out = []
    for d in default_tools(workspace):
        if prefix:
            d = ToolDefinition(
                name=f"{prefix}_{d.name}",
                description=d.description,
                parameters=_tagged(thaw(d.parameters), prefix),
                output=ToolOutput(
                    schema=_tagged(thaw(d.output.schema), prefix), render=d.output.render
                ),
                execute=d.execute,
            )
        out.append(d)
    return out


def native_of(definitions: list[ToolDefinition]) -> list[dict[str, Any]]:
    return [
        {
            "name": d.name,
            "description": d.description,
            "inputSchema": thaw(d.parameters),
            "outputSchema": thaw(d.output.schema),
        }
        for d in definitions
    ]


async def main() -> None:
    found = tokenizer()
    count = found[1] if found else None
    print("tokenizer:", found[0] if found else "none loads offline (characters only)")
    upstreams = [
        Upstream.stdio([sys.executable, str(SCRIPT), "notes"]),
        Upstream.stdio([sys.executable, str(SCRIPT), "tasks"]),
    ]
    async with connect_upstreams(upstreams, on_unsupported="skip") as imported:
        native = [
            t.native.model_dump(
                by_alias=True,
                exclude_none=True,
                include={"name", "description", "input_schema", "output_schema"},
            )
            for t in imported.tools
        ]
        measure("upstream (test servers, over stdio)", imported.definitions, native, count)
    with tempfile.TemporaryDirectory() as tmp, contextlib.suppress(KeyboardInterrupt):
        workspace = Path(tmp)
        builtin = builtin_definitions(workspace)
        measure("builtin", builtin, native_of(builtin), count)
        large = [d for i in range(12) for d in builtin_definitions(workspace, f"p{i:02d}")]
        measure("large (builtin x 12)", large, native_of(large), count)


if __name__ == "__main__":
    anyio.run(main)
