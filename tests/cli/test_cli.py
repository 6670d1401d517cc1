"""The ``codemode`` command, run as a real subprocess against real sandboxes and tools."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def codemode(
    *args: str, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codemode.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd or ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLES / "workspace", ws)
    return ws


def test_run_bundled_example_prints_the_rendered_result(workspace: Path) -> None:
    proc = codemode("run", str(EXAMPLES / "summarize_workspace.py"), "--workspace", str(workspace))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("4 files in the workspace\n")
    assert '"src/inventory.py:7"' in proc.stdout
    assert '"totalLines": 30' in proc.stdout


def test_json_output_is_one_object_with_value_and_dispatch_events(workspace: Path) -> None:
    program = 'r = await tools.grep({"pattern": "TODO"})\nprint(len(r["matches"]))\nreturn 3.0'
    proc = codemode("run", "-", "-w", str(workspace), "--json", stdin=program)
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert set(payload) == {"isError", "content", "value", "error", "events"}
    assert payload["isError"] is False
    assert payload["error"] is None
    assert payload["value"] == {"logs": ["4"], "result": 3}
    assert payload["content"] == [{"type": "text", "text": "4\n3"}]
    types = [e["type"] for e in payload["events"]]
    assert types == ["tool/code-dispatch-start", "tool/code-dispatch"]
    start, settle = payload["events"]
    assert start["name"] == "grep" and start["arguments"] == {"pattern": "TODO"}
    assert settle["subCallId"] == start["subCallId"] == "cli-1:code:1"
    assert settle["isError"] is False


def test_program_failure_exits_1_with_the_error_code(workspace: Path) -> None:
    proc = codemode("run", "-", "-w", str(workspace), "--json", stdin="raise ValueError('boom')")
    assert proc.returncode == 1
    payload = json.loads(proc.stdout)
    assert payload["isError"] is True
    assert payload["value"] is None
    assert payload["error"]["code"] == "CODE_RUN_FAILED"
    assert payload["error"]["message"].startswith("code run failed (exception): Traceback")
    assert payload["error"]["message"].endswith("ValueError: boom")


def test_tool_failures_reach_the_program_as_tool_call_error(workspace: Path) -> None:
    proc = codemode("run", str(EXAMPLES / "handle_errors.py"), "-w", str(workspace))
    assert proc.returncode == 0, proc.stderr
    first, count = proc.stdout.strip().splitlines()
    assert first.startswith("read failed (FS_NOT_FOUND): ")
    assert count == "2"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "missing.py"], "program file 'missing.py' not found"),
        (["run", "-", "--lang", "ruby"], "unknown language 'ruby'"),
        (["run", "-", "--workspace", "/nonexistent-dir"], "is not a directory"),
    ],
)
def test_usage_errors_exit_2(args: list[str], message: str) -> None:
    proc = codemode(*args, stdin="return 1")
    assert proc.returncode == 2
    assert message in proc.stderr
    assert proc.stdout == ""


def test_sdk_prints_the_python_sdk_for_the_catalog(workspace: Path) -> None:
    proc = codemode("sdk", "-w", str(workspace))
    assert proc.returncode == 0, proc.stderr
    assert "`run_code` is the only tool you can call directly" in proc.stdout
    assert "```python" in proc.stdout
    for name in ("async def read(", "async def grep(", "async def bash(", "async def todo_write("):
        assert name in proc.stdout


def test_tools_lists_the_catalog(workspace: Path) -> None:
    proc = codemode("tools", "-w", str(workspace))
    assert proc.returncode == 0, proc.stderr
    for name in ("read", "write", "edit", "glob", "grep", "bash", "job_list", "todo_write"):
        assert name in proc.stdout


# -- TypeScript ---------------------------------------------------------------------------


def test_run_typescript_example_detected_by_extension(workspace: Path) -> None:
    proc = codemode("run", str(EXAMPLES / "fanout.ts"), "--workspace", str(workspace))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == 'read 4 files\n{\n  "biggest": "inventory.py",\n  "lines": 13\n}\n'


def test_typescript_from_stdin_with_lang_and_json(workspace: Path, tmp_path: Path) -> None:
    program = (
        "interface Match { path: string }\n"
        'const r = await tools.grep({pattern: "TODO"}) as { matches: Match[] };\n'
        "console.log(r.matches.length);\n"
        "return 3;\n"
    )
    proc = codemode(
        "run", "-", "--lang", "typescript", "-w", str(workspace), "--json", stdin=program
    )
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["value"] == {"logs": ["4"], "result": 3}
    assert [e["type"] for e in payload["events"]] == [
        "tool/code-dispatch-start",
        "tool/code-dispatch",
    ]
    # The same program in a .ts file needs no --lang.
    script = tmp_path / "count.ts"
    script.write_text(program, encoding="utf-8")
    proc = codemode("run", str(script), "-w", str(workspace))
    assert (proc.returncode, proc.stdout) == (0, "4\n3\n")


@pytest.mark.parametrize(
    ("program", "message"),
    [
        (
            "const x: number = 1;\nthrow new Error('boom ' + x);",
            "code run failed (exception): Error: boom 1\n    at <program>:2",
        ),
        (
            "namespace N { export const x = 1 }\nreturn N.x;",
            "code run failed (syntax): namespace is not supported (line 1): "
            "TypeScript namespaces with values are not erasable — use a plain object",
        ),
    ],
    ids=["thrown", "not-erasable"],
)
def test_typescript_failure_exits_1(workspace: Path, program: str, message: str) -> None:
    proc = codemode("run", "-", "-l", "typescript", "-w", str(workspace), "--json", stdin=program)
    assert proc.returncode == 1, proc.stderr
    payload = json.loads(proc.stdout)
    kind = message.removeprefix("code run failed (").split(")", 1)[0]
    assert payload["error"] == {
        "message": message,
        "code": "CODE_RUN_FAILED",
        "kind": kind,
        "logs": [],
    }


def test_sdk_prints_the_typescript_sdk_for_the_catalog(workspace: Path) -> None:
    proc = codemode("sdk", "--lang", "typescript", "-w", str(workspace))
    assert proc.returncode == 0, proc.stderr
    assert "`run_code` is the only tool you can call directly" in proc.stdout
    assert "```ts" in proc.stdout and "```python" not in proc.stdout
    assert "the body of an async TypeScript function" in proc.stdout
    assert f"- Workspace: `{workspace.resolve()}`; file tools take paths" in proc.stdout
    for name in ("read: {", "grep: {", "bash: {", "todo_write: {"):
        assert name in proc.stdout


def _run_with_tmp(tmp: Path, *args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    tmp.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "codemode.cli", "run", "-", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)},
    )


def test_output_over_64_kib_is_printed_whole_and_nothing_is_left_behind(
    workspace: Path, tmp_path: Path
) -> None:
    tmp = tmp_path / "tmp"
    proc = _run_with_tmp(tmp, "-w", str(workspace), stdin='print("x" * 70000)\nreturn "end"')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "x" * 70000 + "\nend\n"
    assert proc.stderr == ""
    assert list(tmp.iterdir()) == []


def test_json_output_over_64_kib_keeps_the_file_its_preview_names(
    workspace: Path, tmp_path: Path
) -> None:
    tmp = tmp_path / "tmp"
    proc = _run_with_tmp(tmp, "-w", str(workspace), "--json", stdin='print("x" * 70000)')
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["value"]["logs"] == ["x" * 70000]
    preview = payload["content"][0]["text"]
    named = Path(preview.split("Full formatted result stored at: ", 1)[1].split(". ", 1)[0])
    # The file the content points at outlives the run, and stderr says where it is.
    assert named.read_text(encoding="utf-8") == "x" * 70000
    assert f"their full text is kept in {named.parent}" in proc.stderr
    # Only the spilled files are kept: no job or terminal leftovers next to them.
    (state,) = tmp.iterdir()
    assert [p.name for p in state.iterdir()] == ["spill"]


def test_a_run_with_no_output_prints_nothing(workspace: Path) -> None:
    proc = codemode("run", "-", "-w", str(workspace), stdin="x = 1")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_a_failure_goes_to_stderr_and_the_prints_stay_on_stdout(workspace: Path) -> None:
    program = 'print("first")\nprint("second")\nraise ValueError("boom")'
    proc = codemode("run", "-", "-w", str(workspace), stdin=program)
    assert proc.returncode == 1
    assert proc.stdout == "first\nsecond\n"
    assert proc.stderr.startswith("error: code run failed (exception): Traceback")
    assert proc.stderr.rstrip().endswith("ValueError: boom")
    assert "Captured output" not in proc.stderr
    as_json = codemode("run", "-", "-w", str(workspace), "--json", stdin=program)
    error = json.loads(as_json.stdout)["error"]
    assert error["logs"] == ["first", "second"]
    assert error["message"].endswith("Captured output:\nfirst\nsecond")


def test_a_failed_run_prints_every_line_past_the_engines_quote_bound(workspace: Path) -> None:
    # 1.5 MiB of prints: a model's host quotes 1 MiB of it; the terminal gets all of it.
    program = 'for i in range(3000):\n    print(str(i).rjust(500, "."))\nraise ValueError("boom")'
    proc = codemode("run", "-", "-w", str(workspace), stdin=program)
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [str(i).rjust(500, ".") for i in range(3000)]
    assert "not quoted" not in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("flags", "program", "message"),
    [
        (
            ["--compute-ms", "300"],
            "while True: pass",
            "error: code run failed (timeout): compute budget exhausted (300ms busy; raise "
            "with --compute-ms)",
        ),
        (
            ["--wall-ms", "500"],
            "import time\ntime.sleep(5)",
            "error: code run failed (timeout): wall-clock ceiling reached (500ms; raise with "
            "--wall-ms)",
        ),
        (
            ["--output-mb", "1"],
            'return "y" * (2 * 1024 * 1024)',
            "error: code run failed (output-limit): outer output exceeded 1048576 bytes (raise "
            "with --output-mb)",
        ),
        (
            ["--memory-mb", "64"],
            'x = "a" * (100 * 1024 * 1024)',
            "error: code run failed (memory): memory limit exceeded (67108864 bytes; raise "
            "with --memory-mb)",
        ),
    ],
    ids=["compute", "wall", "output", "memory"],
)
def test_limit_failures_name_the_flag_that_raises_them(
    workspace: Path, flags: list[str], program: str, message: str
) -> None:
    proc = codemode("run", "-", "-w", str(workspace), *flags, stdin=program)
    assert proc.returncode == 1
    assert proc.stderr.strip() == message
    # --json keeps the engine's own message (a spec string), without the hint.
    as_json = codemode("run", "-", "-w", str(workspace), "--json", *flags, stdin=program)
    engine = re.sub(
        r"(; | \()raise with --[a-z-]+", lambda m: "" if m[1] == "; " else " (", message
    )
    engine = engine.removeprefix("error: ").removesuffix(" ()")
    assert json.loads(as_json.stdout)["error"]["message"] == engine
