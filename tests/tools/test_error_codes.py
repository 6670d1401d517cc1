"""Every failure a file or search tool raises carries a stable ``error.info.code``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.tools.conftest import Harness, error_of

pytestmark = pytest.mark.anyio


def _failing_calls(ws: Path) -> list[tuple[str, dict[str, Any], str]]:
    return [
        ("read", {"file_path": " "}, "FS_INVALID_ARGS"),
        ("read", {"file_path": "f.txt", "offset": 0}, "FS_INVALID_ARGS"),
        ("read", {"file_path": "f.txt", "limit": 5000}, "FS_INVALID_ARGS"),
        ("read", {"file_path": "a\x00b"}, "FS_INVALID_PATH"),
        ("read", {"file_path": "missing"}, "FS_NOT_FOUND"),
        ("read", {"file_path": "dir"}, "FS_NOT_REGULAR_FILE"),
        ("write", {"file_path": "", "content": "x"}, "FS_INVALID_ARGS"),
        ("write", {"file_path": "f.txt", "content": "x"}, "FS_NOT_OBSERVED"),
        ("edit", {"file_path": "f.txt", "old_string": "a", "new_string": "a"}, "FS_INVALID_ARGS"),
        ("edit", {"file_path": "f.txt", "old_string": "", "new_string": "a"}, "FS_INVALID_ARGS"),
        ("edit", {"file_path": "f.txt", "old_string": "one", "new_string": "1"}, "FS_NOT_OBSERVED"),
        (
            "edit",
            {"file_path": "../x", "old_string": "a", "new_string": "b"},
            "FS_OUTSIDE_WORKSPACE",
        ),
        ("str_replace_editor", {"command": "view", "path": " "}, "FS_INVALID_ARGS"),
        ("str_replace_editor", {"command": "create", "path": "n.txt"}, "FS_INVALID_ARGS"),
        (
            "str_replace_editor",
            {"command": "create", "path": "f.txt", "file_text": "x"},
            "FS_ALREADY_EXISTS",
        ),
        ("str_replace_editor", {"command": "str_replace", "path": "f.txt"}, "FS_INVALID_ARGS"),
        (
            "str_replace_editor",
            {"command": "str_replace", "path": "f.txt", "old_str": ""},
            "FS_INVALID_ARGS",
        ),
        (
            "str_replace_editor",
            {"command": "str_replace", "path": "f.txt", "old_str": "one"},
            "FS_NOT_OBSERVED",
        ),
        (
            "str_replace_editor",
            {"command": "insert", "path": "f.txt", "new_str": "x"},
            "FS_INVALID_ARGS",
        ),
        (
            "str_replace_editor",
            {"command": "view", "path": "f.txt", "view_range": [9, 9]},
            "FS_INVALID_ARGS",
        ),
        (
            "str_replace_editor",
            {"command": "view", "path": "dir", "view_range": [1, 2]},
            "FS_INVALID_ARGS",
        ),
        ("str_replace_editor", {"command": "view", "path": str(ws.parent)}, "FS_OUTSIDE_WORKSPACE"),
        ("glob", {"pattern": " "}, "SEARCH_INVALID_ARGS"),
        ("glob", {"pattern": "*", "path": " "}, "SEARCH_INVALID_ARGS"),
        ("grep", {"pattern": ""}, "SEARCH_INVALID_ARGS"),
        ("grep", {"pattern": "x", "include": "!*.py"}, "SEARCH_INVALID_ARGS"),
        ("grep", {"pattern": "x", "include": "a,b"}, "SEARCH_INVALID_ARGS"),
        ("grep", {"pattern": "x", "include": " "}, "SEARCH_INVALID_ARGS"),
        ("grep", {"pattern": "x", "path": "missing"}, "SEARCH_FAILED"),
        ("grep", {"pattern": "(", "path": "f.txt"}, "SEARCH_INVALID_PATTERN"),
    ]


async def test_every_fs_failure_has_a_code(policy_harness: Harness, workspace: Path) -> None:
    (workspace / "f.txt").write_text("one\n")
    (workspace / "dir").mkdir()
    for name, args, expected in _failing_calls(workspace):
        result = await policy_harness.fail(name, args)
        message, code = error_of(result)
        assert code == expected, (name, args, message)
    # After a read, the writes above go through: the codes named the real reason.
    await policy_harness.ok("read", {"file_path": "f.txt"})
    await policy_harness.ok("edit", {"file_path": "f.txt", "old_string": "one", "new_string": "1"})


async def test_unanticipated_os_errors_are_coded(harness: Harness, workspace: Path) -> None:
    long = "n" * 300  # longer than NAME_MAX: ENAMETOOLONG from the kernel
    for name, args in [
        ("read", {"file_path": long}),
        ("write", {"file_path": long, "content": "x"}),
        ("edit", {"file_path": long, "old_string": "a", "new_string": "b"}),
        ("str_replace_editor", {"command": "view", "path": long}),
        ("str_replace_editor", {"command": "create", "path": long, "file_text": "x"}),
        ("grep", {"pattern": "x", "path": long}),
        ("glob", {"pattern": "*", "path": long}),
    ]:
        message, code = error_of(await harness.fail(name, args))
        assert code == "FS_IO_ERROR", (name, message)
        assert message.endswith(f'"{long}": File name too long'), message


async def test_a_runtime_directory_not_created_yet_reads_as_missing(
    harness: Harness, output_dir: Path
) -> None:
    # The fixture's runtime directory is only created on first use (a spill, a job).
    message, code = error_of(await harness.fail("read", {"file_path": str(output_dir / "x")}))
    assert (message, code) == (f'cannot read "{output_dir / "x"}": not found', "FS_NOT_FOUND")


def test_tool_error_families_declare_a_class_code_and_family() -> None:
    from codemode.tools import _errors

    for cls, family in [
        (_errors.FsError, "FS_"),
        (_errors.SearchError, "SEARCH_"),
        (_errors.BashError, "BASH_"),
        (_errors.JobError, "JOB_"),
    ]:
        assert cls.family == family
        assert cls.code.startswith(family)
        assert cls("m").code == cls.code
        # Instances keep the code they were raised with.
        assert cls("m", family + "NOT_FOUND").code == family + "NOT_FOUND"
