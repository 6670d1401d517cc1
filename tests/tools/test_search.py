"""``glob`` and ``grep`` on the ripgrep wheel's ``rg``: values, caps, spills, errors."""

# Tests set up and inspect real files directly; blocking there is intended.
# ruff: noqa: ASYNC240

from __future__ import annotations

import os
import re
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from codemode.engine import AbortController
from codemode.tools.search._rg import rg_executable
from tests.tools.conftest import Harness, error_of, text_of

pytestmark = pytest.mark.anyio

HINT = "Use read with offset/limit, or grep this path to search within it."


def make_tree(root: Path, files: dict[str, str]) -> None:
    """Create ``files`` with strictly increasing mtimes in the given order."""
    for index, (rel, content) in enumerate(files.items()):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        os.utime(path, (1_600_000_000 + index, 1_600_000_000 + index))


def test_rg_comes_from_the_wheel() -> None:
    rg = rg_executable()
    assert os.path.dirname(rg) == sysconfig.get_path("scripts")
    assert os.access(rg, os.X_OK)


# -- glob -------------------------------------------------------------------------------


async def test_glob_sees_hidden_and_ignored_files_but_no_vcs(
    harness: Harness, workspace: Path
) -> None:
    make_tree(
        workspace,
        {
            ".gitignore": "ignored.ts\n",
            "src/a.ts": "",
            "ignored.ts": "",
            ".hidden/b.ts": "",
            ".git/c.ts": "",
            ".hg/store/d.ts": "",
            "sub/.svn/e.ts": "",
            "z.ts": "",
            "dir.ts/inner.txt": "",
        },
    )
    result = await harness.ok("glob", {"pattern": "*.ts"})
    assert result.value == {
        "root": ".",
        "paths": ["src/a.ts", "ignored.ts", ".hidden/b.ts", "z.ts"],
    }
    assert text_of(result) == "src/a.ts\nignored.ts\n.hidden/b.ts\nz.ts"
    assert result.meta == {
        "shape": "paths",
        "paths": ["src/a.ts", "ignored.ts", ".hidden/b.ts", "z.ts"],
        "truncated": False,
        "total": 4,
    }
    anchored = await harness.ok("glob", {"pattern": "src/*.ts"})
    assert anchored.value["paths"] == ["src/a.ts"]


async def test_glob_path_forms(harness: Harness, workspace: Path) -> None:
    make_tree(workspace, {"src/a.py": "", "src/deep/b.py": "", "top.py": ""})
    rel = await harness.ok("glob", {"pattern": "*.py", "path": "src"})
    assert rel.value == {"root": "src", "paths": ["src/a.py", "src/deep/b.py"]}
    absolute = await harness.ok("glob", {"pattern": "*.py", "path": str(workspace / "src")})
    assert absolute.value == {"root": "src", "paths": ["src/a.py", "src/deep/b.py"]}
    whole = await harness.ok("glob", {"pattern": "*.py", "path": str(workspace)})
    assert whole.value == {"root": ".", "paths": ["src/a.py", "src/deep/b.py", "top.py"]}
    # ripgrep is handed the resolved path, so "." prints as workspace-relative as the rest.
    dot = await harness.ok("glob", {"pattern": "top.py", "path": "."})
    assert dot.value == {"root": ".", "paths": ["top.py"]}


async def test_glob_no_results(harness: Harness) -> None:
    result = await harness.ok("glob", {"pattern": "*.nothing"})
    assert result.value == {"root": ".", "paths": []}
    assert text_of(result) == "No files found"


async def test_glob_sampling_and_spill(workspace: Path, output_dir: Path) -> None:
    h = Harness(workspace, output_dir, glob_max_results=5)
    files = [f"a/{i}.md" for i in range(1, 7)] + ["b/1.md", "b/2.md", "top.md"]
    make_tree(workspace, dict.fromkeys(files, ""))
    result = await h.ok("glob", {"pattern": "*.md"})
    assert result.value["paths"] == files
    text = text_of(result)
    page, _, footer = text.partition("\n\n")
    assert page.split("\n") == ["a/1.md", "a/2.md", "b/1.md", "b/2.md", "top.md"]
    match = re.fullmatch(
        r"\(Showing 5 of 9 paths, sampled across 3 of the 3 top-level entries this pattern "
        r"matched instead of taken in modification-time order\. Full sorted result stored at: "
        r"(\S+)\. " + re.escape(HINT) + r"\)",
        footer,
    )
    assert match is not None, footer
    locator = match.group(1)
    assert locator.startswith(str(output_dir))
    assert Path(locator).read_text() == "\n".join(files)
    assert result.meta == {
        "shape": "paths",
        "paths": ["a/1.md", "a/2.md", "b/1.md", "b/2.md", "top.md"],
        "truncated": True,
        "total": 9,
    }
    # The spilled list is readable back through the tools.
    back = await h.ok("read", {"file_path": locator})
    assert back.value["totalLines"] == 9
    # Nested (code-mode) calls never spill and keep the unsaved wording.
    nested = await h.ok("glob", {"pattern": "*.md"}, parent=object())
    assert text_of(nested).endswith(
        "The complete result could not be saved; narrow pattern or path to see more.)"
    )
    assert nested.meta is None


async def test_glob_sampling_fewer_groups_than_entries(workspace: Path, output_dir: Path) -> None:
    h = Harness(workspace, output_dir, glob_max_results=2)
    make_tree(workspace, {"a/1": "", "a/2": "", "b/1": "", "c": ""})
    text = text_of(await h.ok("glob", {"pattern": "*"}, parent=object()))
    assert text == (
        "a/1\nb/1\n\n(Showing 2 of 4 paths, sampled across 2 of the 3 top-level entries this "
        "pattern matched instead of taken in modification-time order. Narrow path to inspect a "
        "specific subtree. The complete result could not be saved; narrow pattern or path to "
        "see more.)"
    )
    # At or under the cap there is no header or footer.
    text = text_of(await h.ok("glob", {"pattern": "*", "path": "a"}, parent=object()))
    assert text == "a/1\na/2"


async def test_glob_every_path_its_own_group(workspace: Path, output_dir: Path) -> None:
    h = Harness(workspace, output_dir, glob_max_results=2)
    make_tree(workspace, {"x1": "", "x2": "", "x3": ""})
    text = text_of(await h.ok("glob", {"pattern": "x*"}, parent=object()))
    assert text == (
        "x1\nx2\n\n(Showing 2 of 3 paths. The complete result could not be saved; narrow "
        "pattern or path to see more.)"
    )


async def test_glob_errors(harness: Harness, workspace: Path) -> None:
    assert error_of(await harness.fail("glob", {"pattern": "  "})) == (
        "pattern must be a non-empty string",
        "SEARCH_INVALID_ARGS",
    )
    assert error_of(await harness.fail("glob", {"pattern": "*", "path": ""})) == (
        "path must be a non-empty string when given",
        "SEARCH_INVALID_ARGS",
    )
    message, code = error_of(await harness.fail("glob", {"pattern": "["}))
    assert code == "SEARCH_INVALID_PATTERN"
    assert message.startswith("glob pattern rejected by ripgrep: rg: error parsing glob '['")
    message, code = error_of(await harness.fail("glob", {"pattern": "*", "path": "missing"}))
    assert code == "SEARCH_FAILED"
    assert message.startswith("glob search failed (exit 2): rg: missing:")
    for args, problem in [
        ({}, 'missing required property "pattern"'),
        ({"pattern": 1}, '"pattern" must be a string'),
        ({"pattern": "*", "path": 1}, '"path" must be a string'),
    ]:
        assert error_of(await harness.fail("glob", args)) == (
            f"invalid arguments: {problem}",
            "INVALID_ARGS",
        )


async def test_aborted_search(harness: Harness) -> None:
    controller = AbortController()
    controller.abort()
    failed = await harness.fail("glob", {"pattern": "*"}, signal=controller.signal)
    assert error_of(failed)[1] == "ABORTED_BEFORE_DISPATCH"


async def test_raw_output_cap(harness: Harness, workspace: Path) -> None:
    from codemode.tools._errors import SearchError
    from codemode.tools.search._rg import run_rg

    make_tree(workspace, {f"f{i}.txt": "" for i in range(50)})
    with pytest.raises(SearchError) as caught:
        await run_rg(
            ["--files"],
            cwd=str(workspace),
            signal=AbortController().signal,
            tool="glob",
            raw_cap=100,
            stderr_cap=100,
        )
    assert caught.value.code == "SEARCH_RAW_OUTPUT_OVERFLOW"
    assert re.fullmatch(
        r"glob produced \d+ bytes of raw output, over the 100-byte cap; narrow pattern, path, "
        r"or include and retry",
        caught.value.message,
    )


async def _grep_rg(argv: list[str], workspace: Path, signal: Any, *, raw_cap: int = 1000) -> Any:
    """``run_rg`` as the grep tool calls it, in ``workspace``."""
    from codemode.tools.search._rg import run_rg

    return await run_rg(
        argv, cwd=str(workspace), signal=signal, tool="grep", raw_cap=raw_cap, stderr_cap=1000
    )


async def test_abort_kills_ripgrep(workspace: Path) -> None:
    import anyio

    from codemode.tools._errors import SearchError

    controller = AbortController()
    fifo = workspace / "pipe"
    os.mkfifo(fifo)  # rg blocks reading a FIFO forever

    async def abort_soon() -> None:
        await anyio.sleep(0.3)
        controller.abort()

    async with anyio.create_task_group() as group:
        group.start_soon(abort_soon)
        with anyio.fail_after(5), pytest.raises(SearchError) as caught:
            await _grep_rg(["--no-config", "x", str(fifo)], workspace, controller.signal)
    assert caught.value.code == "SEARCH_ABORTED"
    assert caught.value.message == (
        "grep was aborted before completion (tool timeout or caller cancellation)"
    )


@pytest.mark.parametrize("mode", ["paced", "pipe cannot grow", "no pidfd"])
async def test_run_rg_reads_both_pipes_past_a_pipe_buffer(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    from codemode.tools.search import _rg

    if mode == "pipe cannot grow":
        monkeypatch.setattr(_rg, "_grown", lambda fd: False)  # read unpaced
    elif mode == "no pidfd":
        monkeypatch.setattr(_rg, "_pidfd", lambda process: None)  # unpaced, thread wait
    line = "needle " + "x" * 90 + "\n"
    (workspace / "big.txt").write_text(line * 30_000)  # ~2.9 MB: past the grown 1 MiB pipe
    out = await _grep_rg(
        ["--no-config", "--debug", "--no-line-number", "needle", "big.txt"],
        workspace,
        AbortController().signal,
        raw_cap=10_000_000,
    )
    assert out.exit_code == 0
    assert out.stdout == (line * 30_000).encode()
    assert "DEBUG" in out.stderr  # --debug's log, read beside the matches


async def test_run_rg_with_an_already_aborted_signal(workspace: Path) -> None:
    from codemode.tools._errors import SearchError

    (workspace / "a.txt").write_text("needle\n")
    controller = AbortController()
    controller.abort()
    with pytest.raises(SearchError) as caught:
        await _grep_rg(["--no-config", "needle"], workspace, controller.signal)
    assert caught.value.code == "SEARCH_ABORTED"


# -- grep -------------------------------------------------------------------------------


async def test_grep_groups_by_file(harness: Harness, workspace: Path) -> None:
    make_tree(
        workspace,
        {
            "a.py": "needle = 1\nother\nneedle()\r\n",
            "b.txt": "a needle here\n",
            ".hidden.py": "needle\n",
            ".gitignore": "ignored.py\n",
            "ignored.py": "needle\n",
        },
    )
    (workspace / ".git").mkdir()  # ripgrep honours .gitignore inside a repository
    result = await harness.ok("grep", {"pattern": "needle"})
    matches = sorted(result.value["matches"], key=lambda m: (m["path"], m["lineNumber"]))
    assert matches == [
        {"path": "a.py", "lineNumber": 1, "line": "needle = 1"},
        {"path": "a.py", "lineNumber": 3, "line": "needle()"},
        {"path": "b.txt", "lineNumber": 1, "line": "a needle here"},
    ]
    text = text_of(result)
    assert text.startswith("Found 3 matches\n\n")
    assert "a.py\nLine 1: needle = 1\nLine 3: needle()" in text
    assert "b.txt\nLine 1: a needle here" in text
    assert result.meta["shape"] == "matches"
    assert result.meta["total"] == 3 and result.meta["truncated"] is False


async def test_grep_include_path_and_single_match(harness: Harness, workspace: Path) -> None:
    make_tree(workspace, {"src/x.ts": "foo\n", "src/y.js": "foo\n", "lib/z.ts": "foo\n"})
    result = await harness.ok("grep", {"pattern": "fo+", "path": "src", "include": "*.ts"})
    assert result.value == {"matches": [{"path": "src/x.ts", "lineNumber": 1, "line": "foo"}]}
    assert text_of(result) == "Found 1 match\n\nsrc/x.ts\nLine 1: foo"
    alternation = await harness.ok(
        "grep", {"pattern": "foo", "include": "*.{ts,js}", "path": "src"}
    )
    assert len(alternation.value["matches"]) == 2
    one_file = await harness.ok("grep", {"pattern": "foo", "path": str(workspace / "lib/z.ts")})
    assert one_file.value["matches"] == [{"path": "lib/z.ts", "lineNumber": 1, "line": "foo"}]
    none = await harness.ok("grep", {"pattern": "absent"})
    assert none.value == {"matches": []}
    assert text_of(none) == "No matches found"
    # Whitespace is a valid regular expression.
    assert (await harness.ok("grep", {"pattern": " "})).value == {"matches": []}


async def test_grep_cap_preview_and_spill(workspace: Path, output_dir: Path) -> None:
    h = Harness(workspace, output_dir, grep_max_matches=3)
    long = "é" * 1500  # 3000 UTF-8 bytes
    make_tree(workspace, {"m.txt": f"hit 1\nhit 2 {long}\nhit 3\nhit 4\n", "n.txt": "hit 5\n"})
    result = await h.ok("grep", {"pattern": "hit", "path": "m.txt"})
    assert len(result.value["matches"]) == 4
    assert result.value["matches"][1]["line"] == f"hit 2 {long}"  # the value is never cut
    text = text_of(result)
    preview = ("hit 2 " + long).encode()[:2000].decode("utf-8", "ignore") + " (line truncated)"
    head = f"Found 3 of 4 matches\n\nm.txt\nLine 1: hit 1\nLine 2: {preview}\nLine 3: hit 3\n\n"
    assert text.startswith(head)
    match = re.fullmatch(
        r"\(Full grep result stored at: (\S+)\. " + re.escape(HINT) + r"\)", text[len(head) :]
    )
    assert match is not None, text[len(head) :]
    assert Path(match.group(1)).read_text() == (
        f"Found 4 matches\n\nm.txt\nLine 1: hit 1\nLine 2: {preview}\nLine 3: hit 3\nLine 4: hit 4"
    )
    assert result.meta["truncated"] is True and result.meta["total"] == 4
    assert [m["lineNumber"] for m in result.meta["files"][0]["matches"]] == [1, 2, 3]
    nested = await h.ok("grep", {"pattern": "hit", "path": "m.txt"}, parent=object())
    assert text_of(nested).endswith(
        "(The complete result could not be saved; narrow pattern, path, or include to see more.)"
    )


async def test_grep_non_utf8_line(harness: Harness, workspace: Path) -> None:
    (workspace / "latin.txt").write_bytes(b"caf\xe9 needle\n")
    result = await harness.ok("grep", {"pattern": "needle"})
    assert result.value["matches"] == [
        {"path": "latin.txt", "lineNumber": 1, "line": "(line is not valid UTF-8)"}
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"pattern": ""}, "pattern must be a non-empty string"),
        ({"pattern": "x", "path": " "}, "path must be a non-empty string when given"),
        ({"pattern": "x", "include": ""}, "include must be a non-empty glob when given"),
        (
            {"pattern": "x", "include": "!*.ts"},
            'include must be a positive glob filter; negated patterns ("!…") are not supported',
        ),
        (
            {"pattern": "x", "include": "*.ts,*.js"},
            "include must be one glob, not a comma-separated list (use {a,b} alternation instead)",
        ),
    ],
)
async def test_grep_value_errors(harness: Harness, args: dict[str, Any], message: str) -> None:
    assert error_of(await harness.fail("grep", args)) == (message, "SEARCH_INVALID_ARGS")


async def test_grep_ripgrep_errors(harness: Harness) -> None:
    message, code = error_of(await harness.fail("grep", {"pattern": "("}))
    assert code == "SEARCH_INVALID_PATTERN"
    assert message.startswith("grep pattern rejected by ripgrep: rg: regex parse error:")
    message, code = error_of(await harness.fail("grep", {"pattern": "x", "path": "nope"}))
    assert code == "SEARCH_FAILED" and message.startswith("grep search failed (exit 2): ")
    for args, problem in [
        ({}, 'missing required property "pattern"'),
        ({"pattern": "x", "include": 3}, '"include" must be a string'),
        ({"pattern": "x", "path": False}, '"path" must be a string'),
        ({"pattern": None}, '"pattern" must be a string'),
    ]:
        assert error_of(await harness.fail("grep", args)) == (
            f"invalid arguments: {problem}",
            "INVALID_ARGS",
        )


def test_malformed_json_details(tmp_path: Path) -> None:
    from codemode.tools._errors import SearchError
    from codemode.tools.search._grep import parse_matches

    class Cfg:
        workspace = None

    cases = [
        (b"not json", "a line is not JSON"),
        (b"[1]", "a record is not an object"),
        (b'{"type":"match"}', "a match record has no data"),
        (b'{"type":"match","data":{"path":{}}}', "a match record has no path text"),
        # A name that is not UTF-8 comes as base64 bytes: accepted, then the next field.
        (b'{"type":"match","data":{"path":{"bytes":"eA=="}}}', "a match record has no line number"),
        (
            b'{"type":"match","data":{"path":{"bytes":"e!=="},"line_number":1,"lines":{"text":"x"}}}',
            "a match record's path bytes are not base64",
        ),
        (b'{"type":"match","data":{"path":{"text":"a"}}}', "a match record has no line number"),
        (
            b'{"type":"match","data":{"path":{"text":"a"},"line_number":1}}',
            "a match record has no line content",
        ),
        (
            b'{"type":"match","data":{"path":{"text":"a"},"line_number":1,"lines":{}}}',
            "a match record has neither line text nor bytes",
        ),
    ]
    for line, detail in cases:
        with pytest.raises(SearchError) as caught:
            parse_matches(Cfg(), line + b"\n")  # type: ignore[arg-type]
        assert caught.value.message == f"grep received malformed ripgrep --json output ({detail})"
        assert caught.value.code == "SEARCH_FAILED"


async def test_search_cards(harness: Harness, workspace: Path) -> None:
    glob = harness.rt.get("glob")
    grep = harness.rt.get("grep")
    assert glob is not None and grep is not None
    assert glob.present_call is not None and grep.present_call is not None
    assert glob.present_call({"pattern": "*.ts", "path": "src"}) == {
        "card": "generic",
        "title": "Glob *.ts in src",
        "kind": "search",
        "rawInput": "*.ts",
    }
    assert grep.present_call({"pattern": "x", "path": "src", "include": "*.ts"})["title"] == (
        "Grep x in src (*.ts)"
    )
    make_tree(workspace, {"a.txt": "x\n"})
    result = await harness.ok("grep", {"pattern": "x"})
    assert grep.present_result is not None
    assert grep.present_result({"pattern": "x"}, result) == {
        "card": "search",
        "shape": "matches",
        "files": [{"path": "a.txt", "matches": [{"lineNumber": 1, "line": "x"}]}],
        "truncated": False,
        "total": 1,
    }
    assert glob.timeout_ms == grep.timeout_ms == 30000


async def test_meta_is_byte_bounded(workspace: Path, output_dir: Path) -> None:
    from codemode.tools.search._common import bounded

    items = [f"{i:04d}" + "p" * 100 for i in range(100)]

    def make(chunk: list[str], cut: bool) -> dict[str, Any]:
        return {"shape": "paths", "paths": chunk, "truncated": cut, "total": 100}

    meta, cut = bounded(items, 2000, make)
    assert cut and meta["truncated"] is True
    assert 1 <= len(meta["paths"]) < 100
    import json

    assert len(json.dumps(meta, separators=(",", ":")).encode()) <= 2000
    one, _ = bounded(items[:3], 10, make)
    assert len(one["paths"]) == 1  # at least one entry is always kept


def test_meta_size_is_measured_as_js_json_writes_it() -> None:
    from codemode.tools._text import js_json
    from codemode.tools.search._common import bounded

    # Non-ASCII (2-, 3- and 4-byte), escaped control characters, quotes and backslashes:
    # the cut lands where the JSON.stringify bytes say, for every budget.
    items = [f'{i}: é中😀 \x01\x1b\x7f \t\n"\\ \u2028' * (i % 4 + 1) for i in range(30)]

    def make(chunk: list[str], cut: bool) -> dict[str, Any]:
        return {"shape": "paths", "paths": chunk, "truncated": cut, "total": 30}

    whole = len(js_json(make(items, False)).encode("utf-8"))
    sizes = {k: len(js_json(make(items[:k], True)).encode("utf-8")) for k in range(1, 31)}

    def reference(max_bytes: int) -> int:
        if whole <= max_bytes:
            return 30
        return max((k for k, size in sizes.items() if size <= max_bytes), default=1)

    for max_bytes in range(whole + 2):
        meta, _ = bounded(items, max_bytes, make)
        assert len(meta["paths"]) == reference(max_bytes), max_bytes


def test_sealed_list_is_taken_as_is() -> None:
    from codemode.engine.json import sealed, sealed_list, snapshot

    rows = [sealed({"lineNumber": 1, "line": "x"}), "y", 3]
    frozen = sealed_list(rows)
    assert frozen == rows
    assert snapshot(frozen) is frozen  # the pipeline's snapshot does not copy it
    assert snapshot({"files": frozen})["files"] is frozen
    with pytest.raises(TypeError):
        frozen.append(4)


async def test_grep_value_and_meta_are_built_sealed(harness: Harness, workspace: Path) -> None:
    from codemode.engine.json import snapshot

    make_tree(workspace, {"a.txt": "x 1\nx 2\n", "b.txt": "x 3\n", "c.txt": "y\n"})
    grep = harness.rt.get("grep")
    assert grep is not None and grep.output.presentation_meta is not None

    class Ctx:
        signal = AbortController().signal
        call_id = "sealed"
        parent = None

    value = await grep.execute({"pattern": "x"}, Ctx())
    # Already sealed as returned: the pipeline's snapshot and schema check take it as is.
    assert snapshot(value) is value
    assert sorted((m["path"], m["lineNumber"]) for m in value["matches"]) == [
        ("a.txt", 1),
        ("a.txt", 2),
        ("b.txt", 1),
    ]
    other = await grep.execute({"pattern": "y"}, Ctx())
    # render then meta of one value share its grouping; a meta for another value is its own.
    assert grep.output.render({"pattern": "x"}, value)[0]["text"].startswith("Found 3 matches")
    meta = grep.output.presentation_meta({"pattern": "y"}, other)
    assert snapshot(meta) is meta
    assert meta == {
        "shape": "matches",
        "files": [{"path": "c.txt", "matches": [{"lineNumber": 1, "line": "y"}]}],
        "truncated": False,
        "total": 1,
    }
    again = grep.output.presentation_meta({"pattern": "x"}, value)
    assert again["total"] == 3 and snapshot(again) is again
    assert sorted(f["path"] for f in again["files"]) == ["a.txt", "b.txt"]


async def test_glob_groups_are_relative_to_the_root(workspace: Path, output_dir: Path) -> None:
    h = Harness(workspace, output_dir, glob_max_results=2)
    make_tree(workspace, {"a/x/1": "", "a/x/2": "", "a/y/1": ""})
    text = text_of(await h.ok("glob", {"pattern": "*", "path": "a"}, parent=object()))
    assert text.startswith(
        "a/x/1\na/y/1\n\n(Showing 2 of 3 paths, sampled across 2 of the 2 top-level entries"
    )


async def test_timeout_policy_stops_a_hung_search(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import anyio

    from codemode.engine import ToolExecutionInput, ToolRuntime
    from codemode.engine.policies import LocalSpillStore, TimeoutPolicy
    from codemode.tools._config import ToolsConfig
    from codemode.tools.fs._paths import Workspace
    from codemode.tools.search import _rg
    from codemode.tools.search._grep import build_grep

    # A search command that never finishes (FIFOs, the old way to hang ripgrep, are now
    # refused up front); unconfined, since the stand-in is a shell script.
    hung = tmp_path / "hung-rg"
    hung.write_text("#!/bin/sh\nexec sleep 60\n")
    hung.chmod(0o755)
    monkeypatch.setattr(_rg, "rg_executable", lambda: str(hung))
    monkeypatch.setattr(_rg, "landlock_abi", lambda: 0)
    (workspace / "f").write_text("x\n")
    cfg = ToolsConfig(
        workspace=Workspace(workspace),
        spill_store=LocalSpillStore(tmp_path / "spill"),
        output_dir=str(tmp_path / "out"),
        search_timeout_ms=300,
    )
    rt = ToolRuntime()
    rt.register(build_grep(cfg))
    TimeoutPolicy().install(rt)
    with anyio.fail_after(10):
        result = await rt.execute(
            ToolExecutionInput(
                call_id="t",
                name="grep",
                arguments={"pattern": "x", "path": "f"},
                signal=AbortController().signal,
            )
        )
    assert error_of(result) == ("tool call timed out after 300ms", "TOOL_TIMEOUT")


async def test_no_confined_spawner_thread_outlives_its_search(tmp_path: Path) -> None:
    """Each search's rg is started by a Landlock-restricted thread of its own, which ends:
    a host counting its threads after many searches over many roots finds none left."""
    import threading

    from codemode.tools.search import _rg

    if _rg.landlock_abi() == 0:
        pytest.skip("this kernel has no Landlock")

    def spawners() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "codemode-rg-spawner"]

    for i in range(12):
        ws = tmp_path / f"ws{i}"
        ws.mkdir()
        (ws / "f.txt").write_text(f"hit {i}\n")
        h = Harness(ws, tmp_path / f"rt{i}")
        value = (await h.ok("grep", {"pattern": "hit"})).value
        assert value == {"matches": [{"path": "f.txt", "lineNumber": 1, "line": f"hit {i}"}]}
    # A spawner ends right after handing its started rg back; give stragglers a moment.
    for thread in spawners():
        thread.join(timeout=5)
    assert spawners() == []


def test_meta_sizes_with_a_lone_surrogate_match_js_json() -> None:
    # msgspec refuses a lone surrogate: such a meta is measured from js_json, each lone
    # surrogate 3 bytes (a TextEncoder's U+FFFD), never an exception.
    from codemode.tools._text import js_json
    from codemode.tools.search._common import _json_size, bounded

    meta = {"paths": ["a\udcffb", "ok"], "truncated": False}
    assert len(_json_size(meta)) == len(js_json(meta).replace("\udcff", "\ufffd").encode())
    kept, cut = bounded(["a\udcffb", "c"], 64, lambda items, cut: {"paths": items, "cut": cut})
    assert not cut and kept["paths"] == ["a\udcffb", "c"]
