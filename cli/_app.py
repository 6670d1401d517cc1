"""``codemode`` subcommands: run, sdk, tools, bench."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.console import Console
from rich.table import Table

from engine import AbortController, ToolExecutionInput
from engine._json import thaw

from ._compose import LANGUAGES, RunLimits, detect_language, open_session

__all__ = ["app", "main"]

app = typer.Typer(
    name="codemode",
    help="Run model-written programs against tools, in a sandbox, through one guarded pipeline.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_err = Console(stderr=True)
_DEFAULTS = RunLimits()

LangOption = Annotated[
    str | None,
    typer.Option(
        "--lang", "-l", help="Program language: python or typescript (default: by extension)."
    ),
]
WorkspaceOption = Annotated[
    Path,
    typer.Option("--workspace", "-w", help="Directory the built-in tools are bound to."),
]


def _usage(message: str) -> typer.Exit:
    _err.print(f"[bold red]error:[/] {message}")
    return typer.Exit(2)


def _check_lang(lang: str | None) -> None:
    if lang is not None and lang not in LANGUAGES:
        raise _usage(f"unknown language {lang!r} (choose from: {', '.join(LANGUAGES)})")


def _check_workspace(workspace: Path) -> Path:
    if not workspace.is_dir():
        raise _usage(f"workspace {str(workspace)!r} is not a directory")
    return workspace.resolve()


@app.command()
def run(
    file: Annotated[str, typer.Argument(help="Program file, or - to read stdin.")],
    lang: LangOption = None,
    workspace: WorkspaceOption = Path("."),
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object: result, error and events.")
    ] = False,
    description: Annotated[
        str | None,
        typer.Option("--description", "-d", help="What the program does (shown in logs)."),
    ] = None,
    keep_state: Annotated[
        bool,
        typer.Option(
            "--keep-state", help="Keep spilled results and bash output files after the run."
        ),
    ] = False,
    compute_ms: Annotated[
        int, typer.Option("--compute-ms", min=1, help="CPU budget of the program.")
    ] = _DEFAULTS.compute_ms,
    wall_ms: Annotated[
        int, typer.Option("--wall-ms", min=1, help="Wall-clock ceiling of the program.")
    ] = _DEFAULTS.max_wall_ms,
    memory_mb: Annotated[
        int, typer.Option("--memory-mb", min=16, help="Address-space limit of the worker.")
    ] = _DEFAULTS.max_memory_mb,
    output_mb: Annotated[
        int, typer.Option("--output-mb", min=1, help="Cap on logs plus the returned value.")
    ] = _DEFAULTS.max_output_mb,
) -> None:
    """Run one program in code mode against the built-in tools; print the result content."""
    _check_lang(lang)
    ws = _check_workspace(workspace)
    if file == "-":
        program = sys.stdin.read()
    else:
        path = Path(file)
        if not path.is_file():
            raise _usage(f"program file {file!r} not found")
        try:
            program = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise _usage(f"cannot read {file!r}: {exc}") from None
    language = detect_language(file, lang)
    summary = description or f"Run {Path(file).name if file != '-' else 'stdin program'}"
    limits = RunLimits(
        compute_ms=compute_ms,
        max_wall_ms=wall_ms,
        max_memory_mb=memory_mb,
        max_output_mb=output_mb,
    )
    outcome = anyio.run(_run_program, program, language, ws, summary, keep_state, limits)
    result, events = outcome
    if as_json:
        payload: dict[str, Any] = {
            "isError": result.is_error,
            "content": thaw(list(result.content)),
            "value": None if result.is_error else thaw(result.value),
            "error": None
            if not result.is_error
            else {
                "message": result.error.message,
                "code": result.error.info.code if result.error.info else None,
            },
            "events": events,
        }
        sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
    else:
        for block in result.content:
            if block.get("type") == "text":
                sys.stdout.write(str(block.get("text", "")) + "\n")
            else:
                sys.stdout.write(f"[{block.get('type')} content]\n")
    raise typer.Exit(1 if result.is_error else 0)


async def _run_program(
    program: str,
    language: str,
    workspace: Path,
    summary: str,
    keep_state: bool,
    limits: RunLimits,
) -> tuple[Any, list[dict[str, Any]]]:
    async with open_session(workspace, language, keep_state=keep_state, limits=limits) as session:
        if keep_state:
            _err.print(f"state directory: {session.state_dir}")
        result = await session.runtime.execute(
            ToolExecutionInput(
                call_id="cli-1",
                name="run_code",
                arguments={"code": program, "description": summary},
                signal=AbortController().signal,
                agent=session.scope,
            )
        )
        return result, [thaw(e) for e in session.log.events]


@app.command()
def sdk(lang: LangOption = None, workspace: WorkspaceOption = Path(".")) -> None:
    """Print the SDK section a model sees for the built-in tools."""
    _check_lang(lang)
    ws = _check_workspace(workspace)

    async def render() -> str:
        async with open_session(ws, lang or "python") as session:
            sections = session.runtime.system_prompt_sections(session.scope)
            return sections["tools:code-only"] + "\n\n" + sections["tools:sdk"]

    sys.stdout.write(anyio.run(render) + "\n")


@app.command("tools")
def list_tools(workspace: WorkspaceOption = Path(".")) -> None:
    """List the built-in tool catalog."""
    ws = _check_workspace(workspace)

    async def collect() -> list[tuple[str, str, str]]:
        async with open_session(ws, "python") as session:
            rows = []
            for name, definition in session.runtime._registry.view(session.scope).items():
                if name == "run_code":
                    continue
                mode = "parallel-safe" if definition.is_concurrency_safe else "exclusive"
                rows.append((name, mode, definition.description.split("\n")[0][:90]))
            return rows

    table = Table(title="codemode built-in tools")
    table.add_column("tool", style="bold")
    table.add_column("scheduling")
    table.add_column("description")
    for row in anyio.run(collect):
        table.add_row(*row)
    Console().print(table)


@app.command()
def bench(
    name: Annotated[
        str, typer.Argument(help="pipeline, dispatch, sandbox, tools, ts_strip, or all")
    ] = "all",
) -> None:
    """Run the benchmarks (from a source checkout) and print their numbers."""
    root = Path(__file__).resolve().parent.parent / "benchmarks"
    if not root.is_dir():
        raise _usage("benchmarks/ not found: run from a source checkout")
    scripts = sorted(root.glob("bench_*.py")) if name == "all" else [root / f"bench_{name}.py"]
    for script in scripts:
        if not script.is_file():
            raise _usage(f"no benchmark named {name!r}")
        _err.print(f"[bold]== {script.name}[/]")
        code = subprocess.call([sys.executable, str(script)])
        if code:
            raise typer.Exit(code)


def main() -> None:
    """Console-script entry point."""
    app()
