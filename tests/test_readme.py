"""The README stays true: its embedding example runs and prints what it says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section_code(title: str, lang: str) -> str:
    section = README.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(rf"```{lang}\n(.*?)```", section, re.S)
    assert match, f"no {lang} block under {title}"
    return match.group(1)


def test_embedding_example_runs() -> None:
    code = _section_code("Embedding", "python")
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "['run_code']"
    assert "async def add(self, args: AddArgs) -> int:" in proc.stdout
    assert "[\n  0,\n  2,\n  4,\n  6,\n  8\n]" in proc.stdout
    # Parallel-safe calls: the five starts may interleave before the five settles.
    assert lines[-1] == str(["tool/code-dispatch-start"] * 5 + ["tool/code-dispatch"] * 5)


def test_positional_tool_execution_input_as_api_md_shows() -> None:
    from codemode.engine import AbortController, ToolExecutionInput

    signal = AbortController().signal
    inp = ToolExecutionInput("c1", "echo", {"value": "x"}, signal)
    assert (inp.call_id, inp.name, inp.arguments, inp.signal) == (
        "c1",
        "echo",
        {"value": "x"},
        signal,
    )
    assert inp.agent is None and inp.root_call_id is None and inp.parent is None


def test_readme_names_both_commands_and_they_exist() -> None:
    assert "make demo" in README and "make test" in README
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_first_party_tools_example_runs() -> None:
    code = _section_code("First-party tools", "python")
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "23 ['terminal_open', 'terminal_send']"


def test_opentelemetry_example_runs_on_its_own() -> None:
    code = _section_code("OpenTelemetry", "python")
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "hi\n"


def test_opentelemetry_example_traces_its_call() -> None:
    # The same snippet with an SDK provider installed first: the call became a span.
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    code = _section_code("OpenTelemetry", "python")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    code = code.replace("instrument(rt)", "instrument(rt, tracer_provider=provider)", 1)
    namespace = {"provider": provider, "__name__": "readme_otel"}
    exec(compile(code, "README.md", "exec"), namespace)
    assert [s.name for s in exporter.get_finished_spans()] == ["execute_tool echo"]
    assert trace.get_tracer_provider() is not provider
