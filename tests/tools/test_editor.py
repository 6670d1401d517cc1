"""``str_replace_editor``: view, create, str_replace, insert — texts and errors verbatim."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codemode.tools.fs._editor import CLIP_NOTE
from tests.tools.conftest import Harness, error_of, text_of

pytestmark = pytest.mark.anyio


async def edit(h: Harness, **args: Any) -> Any:
    return await h.call("str_replace_editor", args)


async def test_view_file(harness: Harness, workspace: Path) -> None:
    path = workspace / "v.txt"
    path.write_text("alpha\nbeta\r\ngamma\n")
    result = await edit(harness, command="view", path=str(path))
    assert (
        result.value
        == text_of(result)
        == (
            f"Here's the content of {path} with line numbers (which has a total of 4 lines):\n"
            "     1  alpha\n     2  beta\r\n     3  gamma\n     4  \n"
        )
    )
    ranged = await edit(harness, command="view", path=str(path), view_range=[2, 3])
    assert ranged.value == (
        f"Here's the content of {path} with line numbers (which has a total of 4 lines) "
        "with view_range=[2, 3]:\n     2  beta\r\n     3  gamma\n"
    )
    to_end = await edit(harness, command="view", path=str(path), view_range=[3, -1])
    assert to_end.value.endswith("with view_range=[3, -1]:\n     3  gamma\n     4  \n")


async def test_view_range_errors(harness: Harness, workspace: Path) -> None:
    path = workspace / "v.txt"
    path.write_text("a\nb\nc")
    cases = [
        ([1], "Invalid `view_range`. It should be a list of two integers."),
        ([1, 2, 3], "Invalid `view_range`. It should be a list of two integers."),
        (
            [0, 2],
            "Invalid `view_range`: [0, 2]. Its first element `0` should be within the range of "
            "lines of the file: [1, 3]",
        ),
        (
            [4, 4],
            "Invalid `view_range`: [4, 4]. Its first element `4` should be within the range of "
            "lines of the file: [1, 3]",
        ),
        (
            [1, 9],
            "Invalid `view_range`: [1, 9]. Its second element `9` should be smaller than the "
            "number of lines in the file: `3`",
        ),
        (
            [3, 2],
            "Invalid `view_range`: [3, 2]. Its second element `2` should be larger or equal "
            "than its first `3`",
        ),
    ]
    for view_range, message in cases:
        failed = await edit(harness, command="view", path=str(path), view_range=view_range)
        assert error_of(failed) == (message, "FS_INVALID_ARGS"), view_range
    failed = await edit(harness, command="view", path=str(path), view_range=["1", 2])
    assert error_of(failed) == (
        'invalid arguments: "view_range[0]" must be an integer',
        "INVALID_ARGS",
    )


async def test_view_directory(harness: Harness, workspace: Path) -> None:
    for rel in ("b/x.txt", "b/deep/er/y.txt", "a.txt", ".hidden/z", "node_modules/m.js"):
        target = workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("")
    (workspace / "__pycache__").mkdir()
    (workspace / "ln").symlink_to(workspace / "a.txt")
    result = await edit(harness, command="view", path=str(workspace))
    ws = str(workspace)
    assert result.value == (
        f"Here're the files and directories up to 2 levels deep in {ws}, excluding hidden "
        "items, node_modules, and Python cache directories:\n"
        f"d\t{ws}\nf\t{ws}/a.txt\nd\t{ws}/b\nd\t{ws}/b/deep\nf\t{ws}/b/x.txt\n?\t{ws}/ln\n\n"
    )
    failed = await edit(harness, command="view", path=ws, view_range=[1, 2])
    assert error_of(failed) == (
        "The `view_range` parameter is not allowed when `path` points to a directory.",
        "FS_INVALID_ARGS",
    )


async def test_long_output_is_clipped(harness: Harness, workspace: Path) -> None:
    path = workspace / "long.txt"
    path.write_text("\n".join("x" * 100 for _ in range(400)))
    value = (await edit(harness, command="view", path=str(path))).value
    assert value.endswith(CLIP_NOTE)
    assert len(value) == 16000 + len(CLIP_NOTE)
    assert CLIP_NOTE.startswith("<response clipped><NOTE>To save on context")
    assert "`grep -n`" in CLIP_NOTE


async def test_create(harness: Harness, workspace: Path) -> None:
    path = workspace / "new" / "file.py"
    result = await edit(harness, command="create", path=str(path), file_text="print(1)\n")
    assert result.value == f"New file created successfully at: {path}"
    assert path.read_text() == "print(1)\n"
    failed = await edit(harness, command="create", path=str(path), file_text="x")
    assert error_of(failed) == (
        f"File already exists at: {path}. Cannot overwrite files using command `create`.",
        "FS_ALREADY_EXISTS",
    )
    failed = await edit(harness, command="create", path=str(workspace / "n2"))
    assert error_of(failed) == (
        "Parameter `file_text` is required for command: create",
        "FS_INVALID_ARGS",
    )


async def test_str_replace(harness: Harness, workspace: Path) -> None:
    path = workspace / "s.txt"
    path.write_text("one\r\ntwo\none\n")
    result = await edit(
        harness, command="str_replace", path=str(path), old_str="two\n", new_str="2\n"
    )
    assert result.value == f"The file {path} has been edited successfully."
    assert path.read_bytes() == b"one\r\n2\none\n"
    failed = await edit(harness, command="str_replace", path=str(path), old_str="one")
    assert error_of(failed) == (
        "No replacement was performed. Multiple occurrences of old_str `one` in lines [1, 3]. "
        "Please ensure it is unique",
        "FS_AMBIGUOUS_EDIT",
    )
    failed = await edit(harness, command="str_replace", path=str(path), old_str="one\n2")
    assert error_of(failed) == (
        f"No replacement was performed, old_str `one\n2` did not appear verbatim in {path}.",
        "FS_EDIT_NOT_FOUND",
    )
    # new_str omitted deletes the match.
    await edit(harness, command="str_replace", path=str(path), old_str="2\n")
    assert path.read_bytes() == b"one\r\none\n"
    failed = await edit(harness, command="str_replace", path=str(path))
    assert error_of(failed) == (
        "Parameter `old_str` is required for command: str_replace",
        "FS_INVALID_ARGS",
    )
    failed = await edit(harness, command="str_replace", path=str(path), old_str="")
    assert error_of(failed) == (
        "Parameter `old_str` is empty for command: str_replace",
        "FS_INVALID_ARGS",
    )


async def test_insert(harness: Harness, workspace: Path) -> None:
    path = workspace / "i.txt"
    path.write_text("a\nb\n")
    await edit(harness, command="insert", path=str(path), insert_line=0, new_str="top")
    assert path.read_text() == "top\na\nb\n"
    await edit(harness, command="insert", path=str(path), insert_line=2, new_str="x\ny")
    assert path.read_text() == "top\na\nx\ny\nb\n"
    failed = await edit(harness, command="insert", path=str(path), insert_line=9, new_str="z")
    assert error_of(failed) == (
        "Invalid `insert_line` parameter: 9. It should be within the range of lines of the "
        "file: [0, 6]",
        "FS_INVALID_ARGS",
    )
    failed = await edit(harness, command="insert", path=str(path), insert_line=-1, new_str="z")
    assert "Invalid `insert_line` parameter: -1." in error_of(failed)[0]
    failed = await edit(harness, command="insert", path=str(path), new_str="z")
    assert error_of(failed) == (
        "Parameter `insert_line` is required for command: insert",
        "FS_INVALID_ARGS",
    )
    failed = await edit(harness, command="insert", path=str(path), insert_line=1)
    assert error_of(failed) == (
        "Parameter `new_str` is required for command: insert",
        "FS_INVALID_ARGS",
    )


async def test_path_and_file_errors(harness: Harness, workspace: Path) -> None:
    (workspace / "d").mkdir()
    (workspace / "bin").write_bytes(b"\x00")
    (workspace / "latin").write_bytes(b"\xe9")
    # Relative paths are workspace-relative (and shown absolute).
    failed = await edit(harness, command="view", path="rel/x")
    assert error_of(failed) == (
        f"The path {workspace / 'rel/x'} does not exist. Please provide a valid path.",
        "FS_NOT_FOUND",
    )
    assert error_of(await edit(harness, command="view", path="  ")) == (
        "path must be a non-empty string",
        "FS_INVALID_ARGS",
    )
    missing = workspace / "missing"
    for command in ("view", "str_replace", "insert"):
        failed = await edit(
            harness, command=command, path=str(missing), old_str="a", insert_line=0, new_str="b"
        )
        assert error_of(failed) == (
            f"The path {missing} does not exist. Please provide a valid path.",
            "FS_NOT_FOUND",
        )
    failed = await edit(harness, command="str_replace", path=str(workspace / "d"), old_str="a")
    assert error_of(failed) == (
        f"The path {workspace / 'd'} is a directory and only the `view` command can be used on "
        "directories",
        "FS_NOT_REGULAR_FILE",
    )
    assert error_of(await edit(harness, command="view", path=str(workspace / "bin"))) == (
        f'cannot read "{workspace / "bin"}": binary file',
        "FS_NOT_TEXT",
    )
    assert error_of(await edit(harness, command="view", path=str(workspace / "latin"))) == (
        f'cannot read "{workspace / "latin"}": invalid UTF-8 text',
        "FS_NOT_TEXT",
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"path": "/x"}, 'missing required property "command"'),
        ({"command": "view"}, 'missing required property "path"'),
        (
            {"command": "delete", "path": "/x"},
            '"command" must be one of ["view","create","str_replace","insert"]',
        ),
        (
            {"command": "insert", "path": "/x", "insert_line": 1.5},
            '"insert_line" must be an integer',
        ),
        ({"command": "create", "path": "/x", "file_text": None}, '"file_text" must be a string'),
        ({"command": "view", "path": "/x", "view_range": "1,2"}, '"view_range" must be an array'),
        ({"command": "str_replace", "path": "/x", "old_str": 1}, '"old_str" must be a string'),
        ({"command": "insert", "path": "/x", "new_str": []}, '"new_str" must be a string'),
        ({"command": "view", "path": 7}, '"path" must be a string'),
    ],
)
async def test_schema_errors(harness: Harness, args: dict[str, Any], message: str) -> None:
    failed = await harness.call("str_replace_editor", args)
    assert error_of(failed) == (f"invalid arguments: {message}", "INVALID_ARGS")


async def test_cards_and_concurrency(harness: Harness) -> None:
    from codemode.engine import AbortController, ToolExecutionInput

    tool = harness.rt.get("str_replace_editor")
    assert tool is not None and tool.present_call is not None
    assert tool.present_call({"command": "view", "path": "/w/a"}) == {
        "card": "generic",
        "title": "view /w/a",
        "kind": "read",
    }
    assert tool.present_call({"command": "create", "path": "/w/a", "file_text": "t"}) == {
        "card": "diff",
        "title": "create /w/a",
        "diffs": [{"path": "/w/a", "oldText": None, "newText": "t"}],
    }
    assert tool.present_call({"command": "str_replace", "path": "/w/a", "old_str": "o"}) == {
        "card": "diff",
        "title": "str_replace /w/a",
        "diffs": [{"path": "/w/a", "oldText": "o", "newText": ""}],
    }
    assert tool.present_call({"command": "insert", "path": "/w/a", "insert_line": 0}) == {
        "card": "generic",
        "title": "insert /w/a",
        "kind": "edit",
        "locations": [{"path": "/w/a", "line": 1}],
    }

    def mode(command: str) -> str:
        return harness.rt.execution_mode(
            ToolExecutionInput(
                call_id="c",
                name="str_replace_editor",
                arguments={"command": command, "path": "/x"},
                signal=AbortController().signal,
            )
        )

    assert mode("view") == "parallel"
    assert mode("create") == "exclusive"
    assert mode("str_replace") == "exclusive"


async def test_relative_paths_are_workspace_relative(harness: Harness, workspace: Path) -> None:
    created = await edit(harness, command="create", path="pkg/mod.py", file_text="x = 1\n")
    assert created.value == f"New file created successfully at: {workspace / 'pkg/mod.py'}"
    await edit(harness, command="str_replace", path="pkg/mod.py", old_str="1", new_str="2")
    await edit(harness, command="insert", path="./pkg/mod.py", insert_line=0, new_str="# top")
    viewed = await edit(harness, command="view", path="pkg/mod.py")
    assert viewed.value.endswith("     1  # top\n     2  x = 2\n     3  \n")
    assert (workspace / "pkg/mod.py").read_text() == "# top\nx = 2\n"


async def test_the_maybe_you_meant_hint_stays_inside(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("app\n")
    # "/src/app.py" written as if the workspace were "/": the hint names the inside file.
    failed = await edit(harness, command="view", path="/src/app.py")
    message, code = error_of(failed)
    assert code == "FS_OUTSIDE_WORKSPACE"
    assert message.endswith(f" Maybe you meant {workspace / 'src/app.py'}?")
    # No hint when the workspace has no such path, or when it would lead out through a link.
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "secret").write_text("s\n")
    (workspace / "etc").symlink_to(tmp_path / "elsewhere")
    for raw in ("/nope/app.py", "/etc/secret"):
        message, code = error_of(await edit(harness, command="view", path=raw))
        assert code == "FS_OUTSIDE_WORKSPACE" and "Maybe you meant" not in message, message


async def test_listing_of_a_huge_directory_is_the_clipped_sorted_prefix(
    harness: Harness, workspace: Path
) -> None:
    names = [f"n{i:05d}" for i in range(3000)]
    for name in reversed(names):
        (workspace / name).write_text("")
    value = (await edit(harness, command="view", path=".")).value
    ws = str(workspace)
    body = "\n".join([f"d\t{ws}", *(f"f\t{ws}/{name}" for name in names)]) + "\n"
    assert value == (
        f"Here're the files and directories up to 2 levels deep in {ws}, excluding hidden "
        "items, node_modules, and Python cache directories:\n" + body[:16000] + CLIP_NOTE + "\n"
    )
