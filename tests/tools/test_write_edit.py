"""``write`` and ``edit``: values, renders, line endings, errors, diff cards."""

# Tests set up and inspect real files directly; blocking there is intended.
# ruff: noqa: ASYNC240

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.tools.conftest import Harness, error_of, text_of

pytestmark = pytest.mark.anyio


async def test_write_creates_with_parents(harness: Harness, workspace: Path) -> None:
    result = await harness.ok("write", {"file_path": "a/b/new.txt", "content": "x\r\ny\n"})
    path = workspace / "a" / "b" / "new.txt"
    assert path.read_bytes() == b"x\r\ny\n"  # written verbatim
    assert result.value == {
        "path": str(path),
        "operation": "create",
        "before": None,
        "after": "x\ny\n",
    }
    assert text_of(result) == (
        f"<path>{path}</path>\n<type>file</type>\n<content>\nCreated file\n</content>"
    )
    assert result.meta == {"diffs": []}
    tool = harness.rt.get("write")
    assert tool is not None and tool.present_result is not None
    # No basis for hunks: the card falls back to the arguments.
    assert tool.present_result({"file_path": "a/b/new.txt", "content": "x"}, result) == {
        "card": "diff",
        "diffs": [{"path": "a/b/new.txt", "oldText": None, "newText": "x"}],
    }
    assert not list(path.parent.glob(".codemode-*"))  # no temp file left behind


async def test_write_updates_and_reports_hunks(harness: Harness, workspace: Path) -> None:
    path = workspace / "f.txt"
    lines = [f"line {i}" for i in range(1, 21)]
    path.write_text("\r\n".join(lines) + "\r\n")
    path.chmod(0o640)
    changed = list(lines)
    changed[1] = "LINE 2"
    changed[17] = "LINE 18"
    result = await harness.ok("write", {"file_path": "f.txt", "content": "\n".join(changed) + "\n"})
    assert result.value["operation"] == "update"
    assert result.value["before"] == "\n".join(lines) + "\n"  # CRLF normalised
    assert text_of(result).endswith("\nUpdated file\n</content>")
    assert oct(path.stat().st_mode & 0o777) == "0o640"  # permissions survive the rename
    assert result.meta == {
        "diffs": [
            {
                "path": str(path),
                "oldText": "line 1\nline 2\nline 3\nline 4\nline 5\n",
                "newText": "line 1\nLINE 2\nline 3\nline 4\nline 5\n",
            },
            {
                "path": str(path),
                "oldText": "line 15\nline 16\nline 17\nline 18\nline 19\nline 20\n",
                "newText": "line 15\nline 16\nline 17\nLINE 18\nline 19\nline 20\n",
            },
        ]
    }
    tool = harness.rt.get("write")
    assert tool is not None and tool.present_call is not None and tool.present_result is not None
    assert tool.present_result({"file_path": "f.txt", "content": ""}, result) == {
        "card": "diff",
        "diffs": result.meta["diffs"],
    }
    assert tool.present_call({"file_path": "f.txt", "content": "c"}) == {
        "card": "diff",
        "title": "Write f.txt",
        "diffs": [{"path": "f.txt", "oldText": None, "newText": "c"}],
        "locations": [{"path": "f.txt"}],
    }


async def test_write_over_binary_has_no_before(harness: Harness, workspace: Path) -> None:
    (workspace / "b").write_bytes(b"\x00\x01")
    (workspace / "l").write_bytes(b"\xff\xfe")
    for name in ("b", "l"):
        value = (await harness.ok("write", {"file_path": name, "content": "t"})).value
        assert value["operation"] == "update"
        assert value["before"] is None


async def test_write_errors(harness: Harness, workspace: Path) -> None:
    (workspace / "d").mkdir()
    (workspace / "file").write_text("x")
    assert error_of(await harness.fail("write", {"file_path": " ", "content": ""})) == (
        "file_path must be a non-empty string",
        "FS_INVALID_ARGS",
    )
    assert error_of(await harness.fail("write", {"file_path": "d", "content": ""})) == (
        f'cannot write "{workspace / "d"}": not a regular file',
        "FS_NOT_REGULAR_FILE",
    )
    assert error_of(await harness.fail("write", {"file_path": "file/x", "content": ""}))[1] == (
        "FS_NOT_FOUND"
    )
    for args, message in [
        ({"file_path": "x"}, 'missing required property "content"'),
        ({"content": "x"}, 'missing required property "file_path"'),
        ({"file_path": "x", "content": 1}, '"content" must be a string'),
        ({"file_path": ["x"], "content": "x"}, '"file_path" must be a string'),
    ]:
        assert error_of(await harness.fail("write", args)) == (
            f"invalid arguments: {message}",
            "INVALID_ARGS",
        )


async def test_edit_replaces_one_match(harness: Harness, workspace: Path) -> None:
    path = workspace / "e.py"
    path.write_text("a = 1\nb = 2\n")
    result = await harness.ok(
        "edit", {"file_path": "e.py", "old_string": "b = 2", "new_string": "b = 3"}
    )
    assert path.read_text() == "a = 1\nb = 3\n"
    assert result.value == {
        "path": str(path),
        "before": "a = 1\nb = 2\n",
        "after": "a = 1\nb = 3\n",
    }
    assert text_of(result) == f"The file {path} has been updated successfully."
    assert result.meta == {
        "diffs": [{"path": str(path), "oldText": "a = 1\nb = 2\n", "newText": "a = 1\nb = 3\n"}]
    }


async def test_edit_replace_all_and_ambiguity(harness: Harness, workspace: Path) -> None:
    path = workspace / "e"
    path.write_text("x x x\n")
    failed = await harness.fail("edit", {"file_path": "e", "old_string": "x", "new_string": "y"})
    assert error_of(failed) == (
        f'old_string matched 3 times in "{path}"; provide a more specific old_string or set '
        "replace_all to true",
        "FS_AMBIGUOUS_EDIT",
    )
    result = await harness.ok(
        "edit", {"file_path": "e", "old_string": "x", "new_string": "y", "replace_all": True}
    )
    assert path.read_text() == "y y y\n"
    assert text_of(result) == (
        f"The file {path} has been updated. All occurrences were successfully replaced."
    )
    # Non-overlapping counting, left to right.
    path.write_text("aaaa")
    failed = await harness.fail("edit", {"file_path": "e", "old_string": "aa", "new_string": "b"})
    assert "matched 2 times" in error_of(failed)[0]


async def test_edit_keeps_crlf_style_and_drops_bom(harness: Harness, workspace: Path) -> None:
    path = workspace / "w.txt"
    path.write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\nthree\n")
    result = await harness.ok(
        "edit", {"file_path": "w.txt", "old_string": "two\r\nthree", "new_string": "2\n3"}
    )
    assert result.value["before"] == "one\ntwo\nthree\n"
    assert result.value["after"] == "one\n2\n3\n"
    assert path.read_bytes() == b"one\r\n2\r\n3\r\n"
    lf = workspace / "lf.txt"
    lf.write_bytes(b"a\r\nb\nc\n")
    await harness.ok("edit", {"file_path": "lf.txt", "old_string": "c", "new_string": "d"})
    assert lf.read_bytes() == b"a\nb\nd\n"  # more bare LF than CRLF: LF style


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"file_path": "", "old_string": "a", "new_string": "b"},
            "file_path must be a non-empty string",
        ),
        (
            {"file_path": "e", "old_string": "", "new_string": "b"},
            "old_string must be a non-empty string",
        ),
        (
            {"file_path": "e", "old_string": "a", "new_string": "a"},
            "old_string and new_string must differ",
        ),
    ],
)
async def test_edit_value_errors(harness: Harness, args: dict[str, object], message: str) -> None:
    assert error_of(await harness.fail("edit", args)) == (message, "FS_INVALID_ARGS")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"file_path": "e", "old_string": "a"}, 'missing required property "new_string"'),
        ({"file_path": "e", "new_string": "a"}, 'missing required property "old_string"'),
        ({"old_string": "a", "new_string": "b"}, 'missing required property "file_path"'),
        ({"file_path": "e", "old_string": 1, "new_string": "b"}, '"old_string" must be a string'),
        (
            {"file_path": "e", "old_string": "a", "new_string": "b", "replace_all": "yes"},
            '"replace_all" must be a boolean',
        ),
    ],
)
async def test_edit_schema_errors(harness: Harness, args: dict[str, object], message: str) -> None:
    assert error_of(await harness.fail("edit", args)) == (
        f"invalid arguments: {message}",
        "INVALID_ARGS",
    )


async def test_edit_file_errors(harness: Harness, workspace: Path) -> None:
    (workspace / "d").mkdir()
    (workspace / "bin").write_bytes(b"text\nmore\x00")
    (workspace / "latin").write_bytes(b"caf\xe9")
    (workspace / "t").write_text("hello\n")

    async def edit(name: str) -> tuple[str, str | None]:
        args = {"file_path": name, "old_string": "hello", "new_string": "bye"}
        return error_of(await harness.fail("edit", args))

    assert await edit("missing") == (
        f'cannot edit "{workspace / "missing"}": file changed since it was read — re-read the '
        "file, then retry",
        "FS_STALE_VERSION",
    )
    assert await edit("d") == (
        f'cannot edit "{workspace / "d"}": not a regular file',
        "FS_NOT_REGULAR_FILE",
    )
    assert await edit("bin") == (f'cannot edit "{workspace / "bin"}": binary file', "FS_NOT_TEXT")
    assert await edit("latin") == (
        f'cannot edit "{workspace / "latin"}": invalid UTF-8 text',
        "FS_NOT_TEXT",
    )
    failed = await harness.fail("edit", {"file_path": "t", "old_string": "nope", "new_string": "x"})
    assert error_of(failed) == (
        f'old_string was not found in "{workspace / "t"}"',
        "FS_EDIT_NOT_FOUND",
    )
    assert (workspace / "t").read_text() == "hello\n"


async def test_edit_cards(harness: Harness, workspace: Path) -> None:
    tool = harness.rt.get("edit")
    assert tool is not None and tool.present_call is not None and tool.present_result is not None
    assert tool.present_call({"file_path": "e", "old_string": "a", "new_string": "b"}) == {
        "card": "diff",
        "title": "Edit e",
        "diffs": [{"path": "e", "oldText": "a", "newText": "b"}],
    }
    failed = await harness.fail("edit", {"file_path": "e", "old_string": "a", "new_string": "b"})
    assert (
        tool.present_result({"file_path": "e", "old_string": "a", "new_string": "b"}, failed)
        is None
    )


async def test_mutations_are_exclusive(harness: Harness) -> None:
    from codemode.engine import AbortController, ToolExecutionInput

    for name, args in [
        ("write", {"file_path": "a", "content": ""}),
        ("edit", {"file_path": "a", "old_string": "a", "new_string": "b"}),
    ]:
        call = ToolExecutionInput(
            call_id="c", name=name, arguments=args, signal=AbortController().signal
        )
        assert harness.rt.execution_mode(call) == "exclusive"


async def test_large_write_has_no_diff_basis(harness: Harness, workspace: Path) -> None:
    (workspace / "big").write_text("old\n")
    content = "n" * (10 * 1024 * 1024)
    value = (await harness.ok("write", {"file_path": "big", "content": content})).value
    assert value["before"] is None
    assert os.path.getsize(workspace / "big") == len(content)
