"""The read-before-write policy: blind overwrites and stale edits are denied per scope."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codemode.engine import MemorySessionLog
from tests.tools.conftest import Harness, error_of

pytestmark = pytest.mark.anyio


def remedy(kind: str) -> str:
    return " — read the file, then retry" if kind == "read" else " — re-read the file, then retry"


async def test_new_files_need_no_read(policy_harness: Harness, workspace: Path) -> None:
    await policy_harness.ok("write", {"file_path": "new.txt", "content": "a\n"})
    # The scope wrote it, so it knows this version and may overwrite or edit it.
    await policy_harness.ok("write", {"file_path": "new.txt", "content": "b\n"})
    await policy_harness.ok("edit", {"file_path": "new.txt", "old_string": "b", "new_string": "c"})
    assert (workspace / "new.txt").read_text() == "c\n"


async def test_overwrite_requires_a_read(policy_harness: Harness, workspace: Path) -> None:
    path = workspace / "f.txt"
    path.write_text("original\n")
    denied = await policy_harness.fail("write", {"file_path": "f.txt", "content": "x"})
    assert error_of(denied) == (
        f'cannot overwrite existing "{path}" without reading it first{remedy("read")}',
        "FS_NOT_OBSERVED",
    )
    assert path.read_text() == "original\n"
    await policy_harness.ok("read", {"file_path": "f.txt"})
    await policy_harness.ok("write", {"file_path": "f.txt", "content": "x"})
    assert path.read_text() == "x"


async def test_edit_requires_a_read(policy_harness: Harness, workspace: Path) -> None:
    path = workspace / "f.txt"
    path.write_text("original\n")
    args = {"file_path": "f.txt", "old_string": "original", "new_string": "new"}
    denied = await policy_harness.fail("edit", args)
    assert error_of(denied) == (
        f'edit requires reading "{path}" first{remedy("read")}',
        "FS_NOT_OBSERVED",
    )
    await policy_harness.ok("read", {"file_path": "f.txt", "limit": 1})
    await policy_harness.ok("edit", args)
    assert path.read_text() == "new\n"


async def test_changes_on_disk_make_the_read_stale(
    policy_harness: Harness, workspace: Path
) -> None:
    path = workspace / "f.txt"
    path.write_text("v1\n")
    await policy_harness.ok("read", {"file_path": "f.txt"})
    # Same size, possibly the same mtime tick: the content digest still tells them apart.
    path.write_text("v2\n")
    denied = await policy_harness.fail("write", {"file_path": "f.txt", "content": "x"})
    assert error_of(denied) == (
        f'cannot write "{path}": file changed since it was read{remedy("reread")}',
        "FS_STALE_VERSION",
    )
    denied = await policy_harness.fail(
        "edit", {"file_path": "f.txt", "old_string": "v2", "new_string": "v3"}
    )
    assert error_of(denied) == (
        f'cannot edit "{path}": file changed since it was read{remedy("reread")}',
        "FS_STALE_VERSION",
    )
    os.unlink(path)
    denied = await policy_harness.fail("write", {"file_path": "f.txt", "content": "x"})
    assert error_of(denied) == (
        f'cannot write "{path}": file no longer exists{remedy("reread")}',
        "FS_STALE_VERSION",
    )


async def test_seen_absent(policy_harness: Harness, workspace: Path) -> None:
    path = workspace / "ghost.txt"
    await policy_harness.fail("read", {"file_path": "ghost.txt"})
    denied = await policy_harness.fail(
        "edit", {"file_path": "ghost.txt", "old_string": "a", "new_string": "b"}
    )
    assert error_of(denied) == (f'cannot edit "{path}": not found', "FS_NOT_FOUND")
    # Someone else created it after the scope saw it missing: read first.
    path.write_text("surprise\n")
    denied = await policy_harness.fail("write", {"file_path": "ghost.txt", "content": "x"})
    assert "without reading it first" in error_of(denied)[0]


async def test_observations_are_per_scope(policy_harness: Harness, workspace: Path) -> None:
    (workspace / "f.txt").write_text("shared\n")
    other = policy_harness.rt.scope("other", session=MemorySessionLog())
    await policy_harness.ok("read", {"file_path": "f.txt"})
    denied = await policy_harness.fail("write", {"file_path": "f.txt", "content": "x"}, agent=other)
    assert "without reading it first" in error_of(denied)[0]
    # Agent-less calls form their own bucket.
    denied = await policy_harness.fail("write", {"file_path": "f.txt", "content": "x"}, agent=None)
    assert "without reading it first" in error_of(denied)[0]
    await policy_harness.ok("read", {"file_path": "f.txt"}, agent=None)
    await policy_harness.ok("write", {"file_path": "f.txt", "content": "x"}, agent=None)


async def test_links_share_observations(policy_harness: Harness, workspace: Path) -> None:
    (workspace / "real.txt").write_text("r\n")
    (workspace / "alias.txt").symlink_to(workspace / "real.txt")
    await policy_harness.ok("read", {"file_path": "alias.txt"})
    await policy_harness.ok("write", {"file_path": "real.txt", "content": "w\n"})


async def test_editor_commands(policy_harness: Harness, workspace: Path) -> None:
    path = workspace / "f.txt"
    path.write_text("alpha\n")
    replace = {"command": "str_replace", "path": str(path), "old_str": "alpha", "new_str": "beta"}
    denied = await policy_harness.fail("str_replace_editor", replace)
    assert error_of(denied) == (f'edit requires reading "{path}" first', "FS_NOT_OBSERVED")
    await policy_harness.ok("str_replace_editor", {"command": "view", "path": str(path)})
    path.write_text("alpha!\n")
    denied = await policy_harness.fail("str_replace_editor", replace)
    assert error_of(denied) == (
        f'cannot write "{path}": file changed since it was read',
        "FS_STALE_VERSION",
    )
    await policy_harness.ok("read", {"file_path": str(path)})
    await policy_harness.ok("str_replace_editor", replace)
    insert = {"command": "insert", "path": str(path), "insert_line": 0, "new_str": "top"}
    await policy_harness.ok("str_replace_editor", insert)  # its own edit was recorded
    missing = {"command": "insert", "path": str(workspace / "m"), "insert_line": 0, "new_str": "x"}
    denied = await policy_harness.fail("str_replace_editor", missing)
    assert error_of(denied) == (
        f'edit requires reading "{workspace / "m"}" first',
        "FS_NOT_OBSERVED",
    )
    # create refuses existing files by itself and needs no read for new ones.
    create = {"command": "create", "path": str(workspace / "c.txt"), "file_text": "c"}
    await policy_harness.ok("str_replace_editor", create)


async def test_disposer_removes_the_policy(policy_harness: Harness, workspace: Path) -> None:
    (workspace / "f.txt").write_text("x\n")
    await policy_harness.fail("write", {"file_path": "f.txt", "content": "y"})
    # Without the policy the same call succeeds.
    plain = Harness(workspace, policy_harness.output_dir)
    await plain.ok("write", {"file_path": "f.txt", "content": "y"})


async def test_bad_arguments_reach_the_tool(policy_harness: Harness) -> None:
    failed = await policy_harness.fail("write", {"file_path": "", "content": "x"})
    assert error_of(failed) == ("file_path must be a non-empty string", "FS_INVALID_ARGS")
    failed = await policy_harness.fail("write", {"file_path": "../x", "content": "x"})
    assert error_of(failed)[1] == "FS_OUTSIDE_WORKSPACE"


def test_one_policy_one_workspace(tmp_path: Path) -> None:
    from codemode.tools import FsObservationPolicy, default_tools

    policy = FsObservationPolicy()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    default_tools(tmp_path / "a", fs_policy=policy)
    default_tools(tmp_path / "a", fs_policy=policy)
    with pytest.raises(ValueError, match="serves one workspace"):
        default_tools(tmp_path / "b", fs_policy=policy)


async def test_install_and_dispose_switch_enforcement(workspace: Path, output_dir: Path) -> None:
    from codemode.tools import FsObservationPolicy

    (workspace / "f.txt").write_text("x\n")
    policy = FsObservationPolicy()
    h = Harness(workspace, output_dir, fs_policy=policy)
    # Recording without install enforces nothing.
    await h.ok("write", {"file_path": "f.txt", "content": "y\n"})
    (workspace / "f.txt").write_text("changed behind its back\n")
    dispose = policy.install(h.rt)
    denied = await h.fail("write", {"file_path": "f.txt", "content": "z\n"})
    assert error_of(denied)[1] == "FS_STALE_VERSION"
    dispose()
    dispose()  # idempotent
    await h.ok("write", {"file_path": "f.txt", "content": "z\n"})
    assert (workspace / "f.txt").read_text() == "z\n"
