"""Tools bound what they build before building it (``max_result_bytes``, ``FS_TOO_LARGE``).

Peaks are measured with ``tracemalloc`` (every Python allocation, the worker threads' too),
which is deterministic: a refusal that happens *after* building the result shows up as a
peak the size of that result.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode.tools.fs._diff import diff_hunks
from tests.tools.conftest import Harness, error_of

pytestmark = pytest.mark.anyio

CAP = 1024 * 1024


@pytest.fixture
def capped(workspace: Path, output_dir: Path) -> Harness:
    return Harness(workspace, output_dir, max_result_bytes=CAP)


@pytest.fixture
def traced() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


async def _peak_of(h: Harness, name: str, args: Any) -> tuple[Any, int]:
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    result = await h.call(name, args)
    return result, tracemalloc.get_traced_memory()[1] - base


async def test_replace_all_that_would_explode_is_refused_before_building(
    capped: Harness, workspace: Path, traced: None
) -> None:
    target = workspace / "a.txt"
    target.write_text("a" * 200_000)
    args = {"file_path": "a.txt", "old_string": "a", "new_string": "b" * 3000, "replace_all": True}
    result, peak = await _peak_of(capped, "edit", args)
    message, code = error_of(result)
    assert code == "FS_TOO_LARGE"
    assert message == (
        f'cannot edit "{target}": the result would be 600000000 bytes, over the {CAP}-byte limit'
    )
    # The 600 MB result was never materialised: the peak is a few copies of the input.
    assert peak < 4 * 1024 * 1024, peak
    assert target.read_text() == "a" * 200_000


async def test_edit_counts_restored_crlf_in_the_result(capped: Harness, workspace: Path) -> None:
    target = workspace / "crlf.txt"
    # 270,000 CRLF lines: "yy\n" LF-normalised is 810,000 bytes (under the cap), but the
    # file keeps its CRLF style, so on disk it would be 1,080,000 bytes (over it).
    target.write_bytes(b"x\r\n" * 270_000)
    args = {"file_path": "crlf.txt", "old_string": "x", "new_string": "y", "replace_all": True}
    await capped.ok("edit", args)
    args = {"file_path": "crlf.txt", "old_string": "y", "new_string": "yy", "replace_all": True}
    failed = await capped.fail("edit", args)
    assert error_of(failed)[1] == "FS_TOO_LARGE"
    assert target.read_bytes() == b"y\r\n" * 270_000


async def test_editing_a_file_over_the_cap_is_refused_before_reading(
    capped: Harness, workspace: Path, traced: None
) -> None:
    (workspace / "big.txt").write_bytes(b"z" * (CAP + 1))
    args = {"file_path": "big.txt", "old_string": "z", "new_string": "y"}
    result, peak = await _peak_of(capped, "edit", args)
    assert error_of(result)[1] == "FS_TOO_LARGE"
    assert peak < CAP // 2, peak


async def test_write_over_the_cap_is_refused(capped: Harness, workspace: Path) -> None:
    failed = await capped.fail("write", {"file_path": "w.txt", "content": "é" * (CAP // 2 + 1)})
    message, code = error_of(failed)
    assert code == "FS_TOO_LARGE"
    assert f"the result would be {CAP + 2} bytes" in message
    assert not (workspace / "w.txt").exists()
    await capped.ok("write", {"file_path": "w.txt", "content": "é" * (CAP // 2)})


@pytest.mark.parametrize(
    ("command", "extra"),
    [
        ("create", {"file_text": "c" * (CAP + 1)}),
        ("str_replace", {"old_str": "seed", "new_str": "n" * CAP}),
        ("insert", {"insert_line": 0, "new_str": "n" * CAP}),
    ],
)
async def test_editor_results_over_the_cap_are_refused_before_building(
    capped: Harness, workspace: Path, traced: None, command: str, extra: dict[str, Any]
) -> None:
    path = workspace / ("new.txt" if command == "create" else "seed.txt")
    if command != "create":
        path.write_text("seed\n")
    args = {"command": command, "path": str(path), **extra}
    result, peak = await _peak_of(capped, "str_replace_editor", args)
    message, code = error_of(result)
    assert code == "FS_TOO_LARGE", message
    # The argument itself is already in memory; nothing near its size was built on top.
    assert peak < CAP // 2, peak
    assert path.exists() == (command != "create")


async def test_view_of_a_file_over_the_cap_is_refused(capped: Harness, workspace: Path) -> None:
    (workspace / "v.txt").write_bytes(b"v\n" * (CAP // 2 + 1))
    failed = await capped.fail("str_replace_editor", {"command": "view", "path": "v.txt"})
    message, code = error_of(failed)
    assert code == "FS_TOO_LARGE" and "use read with offset/limit" in message


def test_large_diffs_are_summarised() -> None:
    before = "\n".join(f"old line {i}" for i in range(20_000)) + "\n"
    after = "\n".join(f"new line {i}" for i in range(20_000)) + "\n"
    [hunk] = diff_hunks("f", before, after)
    assert hunk["oldText"] == "(20000 lines, 288890 characters; too large to show)"
    assert hunk["newText"] == "(20000 lines, 288890 characters; too large to show)"


def test_small_changes_in_large_files_keep_exact_hunks() -> None:
    lines = [f"line {i}\n" for i in range(50_000)]
    changed = list(lines)
    changed[100] = "CHANGED 100\n"
    changed[40_000] = "CHANGED 40000\n"
    hunks = diff_hunks("f", "".join(lines), "".join(changed))
    assert hunks == [
        {"path": "f", "oldText": "".join(lines[97:104]), "newText": "".join(changed[97:104])},
        {
            "path": "f",
            "oldText": "".join(lines[39_997:40_004]),
            "newText": "".join(changed[39_997:40_004]),
        },
    ]
