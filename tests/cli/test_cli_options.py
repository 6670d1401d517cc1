"""The CLI's rough edges (options, usage errors) and its machine-readable failure kinds:
real ``codemode`` subprocesses against real sandboxes and the built-in tools."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEED_CATALOG = ROOT / "tests" / "data" / "seed_catalog.json"
# The catalog package each built-in tool comes from (the seed has two ``bash`` tools).
PACKAGES = {
    "read": "@deepseek-ai/dsh-tool-fs",
    "write": "@deepseek-ai/dsh-tool-fs",
    "edit": "@deepseek-ai/dsh-tool-fs",
    # Offered only when the model takes images (--images).
    "read_image": "@deepseek-ai/dsh-tool-fs",
    "str_replace_editor": "@deepseek-ai/dsh-tool-str-replace-editor",
    "glob": "@deepseek-ai/dsh-tool-fs-search",
    "grep": "@deepseek-ai/dsh-tool-fs-search",
    "bash": "@deepseek-ai/dsh-tool-bash",
    "job_list": "@deepseek-ai/dsh-tool-jobs",
    "job_output": "@deepseek-ai/dsh-tool-jobs",
    "job_kill": "@deepseek-ai/dsh-tool-jobs",
    "todo_write": "@deepseek-ai/dsh-tool-todo",
    "ask_user_question": "@deepseek-ai/dsh-tool-ask-user",
    "exit_plan_mode": "@deepseek-ai/dsh-plan-mode",
    "skill": "@deepseek-ai/dsh-tool-skill",
    "web_fetch": "@deepseek-ai/dsh-tool-web",
    "web_search": "@deepseek-ai/dsh-tool-web",
    "lsp": "@deepseek-ai/dsh-tool-lsp",
    **{
        f"terminal_{verb}": "@deepseek-ai/dsh-tool-terminal"
        for verb in ("open", "send", "read", "signal", "list", "close")
    },
    # The agent-bound rows `codemode agent` serves.
    **{name: "@deepseek-ai/dsh-tool-goal" for name in ("create_goal", "get_goal", "update_goal")},
    **{
        name: "@deepseek-ai/dsh-schedule"
        for name in ("schedule_create", "schedule_list", "schedule_delete")
    },
    **{
        name: "@deepseek-ai/dsh-tool-session-query"
        for name in (
            "session_search",
            "session_event_search",
            "session_trace",
            "session_event_trace",
            "session_event_read",
        )
    },
    "subagent": "@deepseek-ai/dsh-tool-subagent",
    **{
        name: "@deepseek-ai/dsh-tool-subagent-control"
        for name in ("list_agents", "send_message", "interrupt_agent")
    },
    "report": "@deepseek-ai/dsh-tool-subagent-report",
    "workflow": "@deepseek-ai/dsh-tool-workflow",
    "ralph": "@deepseek-ai/dsh-tool-ralph",
}
# Listed too, but not a catalog row of its own: the forking variant of `subagent`.
VARIANTS = {"subagent_fork"}
# What `codemode run` offers (no images): every other row exists only under `agent`.
RUN_TOOLS = {
    name
    for name, package in PACKAGES.items()
    if name != "read_image"
    and not package.endswith(
        (
            "-goal",
            "-schedule",
            "-session-query",
            "-subagent",
            "-subagent-control",
            "-subagent-report",
            "-workflow",
            "-ralph",
        )
    )
}


def codemode(
    *args: str, stdin: str | None = None, columns: int | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run(
        [sys.executable, "-m", "codemode.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )


# ------------------------------------------------------------------ options


def test_version_prints_the_package_version() -> None:
    proc = codemode("--version")
    assert (proc.returncode, proc.stdout) == (0, f"codemode {metadata.version('codemode')}\n")


@pytest.mark.parametrize(
    ("alias", "program"),
    [("py", "return 6 * 7"), ("ts", "const n: number = 6 * 7; return n;")],
)
def test_lang_aliases(alias: str, program: str, tmp_path: Path) -> None:
    proc = codemode("run", "-", "--lang", alias, "-w", str(tmp_path), stdin=program)
    assert (proc.returncode, proc.stdout) == (0, "42\n"), proc.stderr


def test_sdk_takes_the_ts_alias(tmp_path: Path) -> None:
    proc = codemode("sdk", "--lang", "ts", "-w", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "```ts\n" in proc.stdout and "declare const tools" in proc.stdout


def test_a_directory_as_file_says_it_is_a_directory(tmp_path: Path) -> None:
    proc = codemode("run", str(tmp_path), "-w", str(tmp_path))
    assert proc.returncode == 2
    assert f"program file {str(tmp_path)!r} is a directory" in proc.stderr
    assert "not found" not in proc.stderr


@pytest.mark.parametrize("lang", ["python", "typescript"])
def test_memory_below_the_guest_floor_is_refused_up_front(lang: str, tmp_path: Path) -> None:
    proc = codemode(
        "run", "-", "--lang", lang, "-w", str(tmp_path), "--memory-mb", "47", stdin="return 1"
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert f"--memory-mb 47 is below the 48 MiB a {lang} worker needs to start" in proc.stderr


@pytest.mark.parametrize(
    ("lang", "program"),
    [
        ("python", "xs = [str(i) * 100_000 for i in range(20)]\nreturn len(xs)"),
        (
            "typescript",
            "const xs: string[] = [];\n"
            "for (let i = 0; i < 20; i++) xs.push(String(i).repeat(100000));\n"
            "return xs.length;",
        ),
    ],
)
def test_the_floor_itself_runs_a_program(lang: str, program: str, tmp_path: Path) -> None:
    # The floor is what a guest needs: a program holding 2 MB of strings runs at it.
    proc = codemode(
        "run", "-", "--lang", lang, "-w", str(tmp_path), "--memory-mb", "48", stdin=program
    )
    assert (proc.returncode, proc.stdout) == (0, "20\n"), proc.stdout + proc.stderr


@pytest.mark.parametrize("command", [[], ["run"], ["tools"], ["sdk"]])
def test_help_shows_no_bool_metavar_for_flags(command: list[str]) -> None:
    proc = codemode(*command, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "--help" in proc.stdout
    assert "<bool>" not in proc.stdout
    assert "bool" not in proc.stdout.lower().replace("boolean", "")
    assert "..." not in proc.stdout.replace("[ARGS]...", "")  # no summary cut short


# ------------------------------------------------------------------ tools


def _seed_entries() -> dict[str, dict[str, object]]:
    seed = json.loads(SEED_CATALOG.read_text(encoding="utf-8"))["tools"]
    return {t["name"]: t for t in seed if PACKAGES.get(t["name"]) == t["package"]}


def test_tools_json_is_the_catalog_for_hosts(tmp_path: Path) -> None:
    proc = codemode("tools", "--json", "-w", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    entries = json.loads(proc.stdout)
    assert isinstance(entries, list)
    seed = _seed_entries()
    assert sorted(e["name"] for e in entries) == sorted({*PACKAGES, *VARIANTS})
    for entry in entries:
        if entry["name"] in VARIANTS:
            continue
        expected = seed[entry["name"]]
        description = str(expected["description"])
        assert entry["description"] == description, entry["name"]
        # Key order included: hosts may forward the schema byte for byte.
        assert json.dumps(entry["parameters"]) == json.dumps(expected["parameters"])
        assert isinstance(entry["outputSchema"], dict)
    by_name = {e["name"]: e for e in entries}
    assert by_name["read"]["parallelSafe"] == "always"
    assert by_name["bash"]["parallelSafe"] == "never"
    assert by_name["write"]["parallelSafe"] == "never"
    assert by_name["str_replace_editor"]["parallelSafe"] == "conditional"
    assert by_name["str_replace_editor"]["parallelSafeWhen"] == {"command": ["view"]}
    assert "parallelSafeWhen" not in by_name["read"]
    # Where each tool is offered: run and agent alike, only under agent, only with images.
    offered = {e["name"]: e["offered"] for e in entries}
    assert {n for n, o in offered.items() if o == "always"} == RUN_TOOLS
    assert {n for n, o in offered.items() if o == "images"} == {"read_image"}
    assert {n for n, o in offered.items() if o == "agent"} == (
        {*PACKAGES, *VARIANTS} - RUN_TOOLS - {"read_image"}
    )


def test_run_offers_exactly_the_always_rows_and_read_image_with_images(tmp_path: Path) -> None:
    program = "return sorted(n for n in dir(tools) if not n.startswith('_'))"
    plain = codemode("run", "-", "-w", str(tmp_path), "--json", stdin=program)
    assert json.loads(plain.stdout)["value"]["result"] == sorted(RUN_TOOLS), plain.stderr
    with_images = codemode("run", "-", "-w", str(tmp_path), "--json", "--images", stdin=program)
    assert json.loads(with_images.stdout)["value"]["result"] == sorted({*RUN_TOOLS, "read_image"})


def _table_rows(stdout: str) -> dict[str, tuple[str, str, str]]:
    """tool -> (its section's title, scheduling, description with its wrapped lines
    re-joined)."""
    header, *lines = stdout.rstrip("\n").splitlines()
    mode_at, text_at = header.index("scheduling"), header.index("description")
    rows: dict[str, tuple[str, str, str]] = {}
    name = section = ""
    for line in lines:
        if not line:
            continue
        if line.endswith(":") and "  " not in line:
            section = line
        elif not line.startswith(" "):
            name = line[:mode_at].strip()
            rows[name] = (section, line[mode_at:text_at].strip(), line[text_at:])
        else:
            assert line[:text_at].strip() == "", line
            title, mode, text = rows[name]
            rows[name] = (title, mode, f"{text} {line[text_at:]}")
    return rows


def test_tools_table_labels_scheduling_by_the_classifier_and_wraps_whole_words(
    tmp_path: Path,
) -> None:
    proc = codemode("tools", "-w", str(tmp_path), columns=80)
    assert proc.returncode == 0, proc.stderr
    assert all(len(line) <= 80 for line in proc.stdout.splitlines() if " " in line.strip())
    rows = _table_rows(proc.stdout)
    seed = _seed_entries()
    assert sorted(rows) == sorted({*PACKAGES, *VARIANTS})
    assert rows["str_replace_editor"][1] == "parallel-safe for command=view"
    assert rows["read"][1] == "parallel-safe"
    assert rows["grep"][1] == "parallel-safe"
    assert rows["edit"][1] == "exclusive"
    assert rows["read"][0] == "Offered by codemode run and codemode agent:"
    assert rows["read_image"][0] == "With --images (the model takes images):"
    assert rows["subagent"][0].startswith("Only under codemode agent")
    assert {n for n, r in rows.items() if r[0] == rows["read"][0]} == RUN_TOOLS
    for name, (_offered, _mode, text) in rows.items():
        if name in VARIANTS:
            continue
        description = str(seed[name]["description"])
        first_paragraph = " ".join(description.split("\n\n", 1)[0].split())
        assert text == first_paragraph, name


# ------------------------------------------------------------------ run output


@pytest.mark.parametrize(
    ("lang", "program", "kind"),
    [
        ("python", "raise ValueError('x')", "exception"),
        ("python", "return {1, 2}", "invalid-output"),
        ("python", "while True:\n    pass", "timeout"),
        ("typescript", "throw new Error('x')", "exception"),
        ("typescript", "return new Map()", "invalid-output"),
        ("typescript", "while (true) {}", "timeout"),
    ],
)
def test_json_error_has_the_failure_kind(
    lang: str, program: str, kind: str, tmp_path: Path
) -> None:
    proc = codemode(
        "run", "-", "--lang", lang, "-w", str(tmp_path), "--json", "--compute-ms", "500",
        stdin=program,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert error["kind"] == kind
    assert error["code"] == "CODE_RUN_FAILED"
    assert error["message"].startswith(f"code run failed ({kind}): ")


def test_json_success_has_a_null_error(tmp_path: Path) -> None:
    proc = codemode("run", "-", "-w", str(tmp_path), "--json", stdin="return 1")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["error"] is None


@pytest.mark.parametrize(
    ("lang", "program"),
    [
        ("python", 'await tools.read({"file_path": "notes.txt", "limt": 1})'),
        ("typescript", 'await tools.read({file_path: "notes.txt", limt: 1});'),
    ],
)
def test_unknown_keys_are_named_in_the_run_output(lang: str, program: str, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("one\ntwo\n", encoding="utf-8")
    proc = codemode("run", "-", "--lang", lang, "-w", str(tmp_path), "--json", stdin=program)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["value"]["logs"] == ['read ignored unknown key "limt" (did you mean "limit"?)']
    # The key was passed on: the call ran and was logged with it.
    assert payload["events"][0]["arguments"] == {"file_path": "notes.txt", "limt": 1}


# ------------------------------------------------------------------ state directory


def test_a_workspace_holding_the_temp_dir_keeps_job_output_outside_it(tmp_path: Path) -> None:
    # With TMPDIR inside the workspace (as with ``-w /tmp``), the private state (job
    # output, spills) moves to the next candidate outside the workspace instead of
    # failing or landing where the file tools can read it.
    inner_tmp = tmp_path / "tmp"
    inner_tmp.mkdir()
    program = (
        'r = await tools.bash({"command": "echo from-job", "description": "job",'
        ' "run_in_background": True})\n'
        'out = await tools.job_output({"job_id": r["jobId"], "block": True})\n'
        "return out\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(inner_tmp)}
    proc = subprocess.run(
        [sys.executable, "-m", "codemode.cli", "run", "-", "-w", str(tmp_path), "--json"],
        input=program,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "from-job" in json.dumps(json.loads(proc.stdout)["value"])
    assert list(inner_tmp.iterdir()) == []


def test_a_workspace_containing_every_state_candidate_is_a_usage_error() -> None:
    proc = codemode("run", "-", "-w", "/", stdin="return 1")
    assert proc.returncode == 2
    assert "set TMPDIR to a writable directory outside the workspace" in proc.stderr
