"""Workspace confinement: ``..``, outside absolute paths and escaping links are refused."""

# Tests set up and inspect real files directly; blocking there is intended.
# ruff: noqa: ASYNC240

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.tools.conftest import Harness, error_of

pytestmark = pytest.mark.anyio

OUTSIDE = "FS_OUTSIDE_WORKSPACE"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside.txt"
    target.write_text("secret\n")
    return target


CALLS: list[tuple[str, Any]] = [
    ("read", lambda p: {"file_path": p}),
    ("write", lambda p: {"file_path": p, "content": "x"}),
    ("edit", lambda p: {"file_path": p, "old_string": "secret", "new_string": "x"}),
    # The editor takes absolute paths only; the fixture joins relative ones lexically.
    ("str_replace_editor", lambda p: {"command": "view", "path": p}),
    ("str_replace_editor", lambda p: {"command": "create", "path": p, "file_text": "x"}),
    ("glob", lambda p: {"pattern": "*", "path": p}),
    ("grep", lambda p: {"pattern": "secret", "path": p}),
    ("bash", lambda p: {"command": "pwd", "description": "where", "workdir": p}),
]


def _raw(harness: Harness, name: str, path: str) -> str:
    if name == "str_replace_editor" and not os.path.isabs(path):
        return f"{harness.workspace}/{path}"
    return path


@pytest.mark.parametrize(("name", "make"), CALLS)
async def test_dot_dot_is_refused(harness: Harness, outside: Path, name: str, make: Any) -> None:
    raw = _raw(harness, name, "../outside.txt")
    failed = await harness.fail(name, make(raw))
    message, code = error_of(failed)
    assert code == OUTSIDE
    assert (
        message == f'cannot access "{raw}": the path is outside the workspace {harness.workspace}'
    )
    assert outside.read_text() == "secret\n"


@pytest.mark.parametrize(("name", "make"), CALLS)
async def test_absolute_outside_is_refused(
    harness: Harness, outside: Path, name: str, make: Any
) -> None:
    failed = await harness.fail(name, make(str(outside)))
    assert error_of(failed)[1] == OUTSIDE
    assert outside.read_text() == "secret\n"


@pytest.mark.parametrize(("name", "make"), CALLS)
async def test_links_leading_out_are_refused(
    harness: Harness, workspace: Path, outside: Path, name: str, make: Any
) -> None:
    (workspace / "link.txt").symlink_to(outside)
    (workspace / "linkdir").symlink_to(outside.parent)
    for raw in ("link.txt", "linkdir/outside.txt", str(workspace / "link.txt")):
        failed = await harness.fail(name, make(_raw(harness, name, raw)))
        message, code = error_of(failed)
        assert code == OUTSIDE, message
        assert "a symbolic link leads outside the workspace" in message
    assert outside.read_text() == "secret\n"


async def test_links_inside_the_workspace_work(harness: Harness, workspace: Path) -> None:
    (workspace / "real.txt").write_text("inside\n")
    (workspace / "alias.txt").symlink_to(workspace / "real.txt")
    value = (await harness.ok("read", {"file_path": "alias.txt"})).value
    assert value["path"] == str(workspace / "alias.txt")
    assert value["lines"] == [{"number": 1, "text": "inside"}]
    await harness.ok("write", {"file_path": "alias.txt", "content": "changed\n"})
    # The write went through the link to its target; the link itself survives.
    assert (workspace / "alias.txt").is_symlink()
    assert (workspace / "real.txt").read_text() == "changed\n"


async def test_workspace_given_through_a_link(tmp_path: Path, output_dir: Path) -> None:
    real = tmp_path / "real-ws"
    real.mkdir()
    (real / "f").write_text("x\n")
    alias = tmp_path / "alias-ws"
    alias.symlink_to(real)
    h = Harness(alias, output_dir)
    by_alias = (await h.ok("read", {"file_path": str(alias / "f")})).value
    by_real = (await h.ok("read", {"file_path": str(real / "f")})).value
    assert by_alias["path"] == by_real["path"] == str(real / "f")


async def test_runtime_dirs_are_readable_but_not_writable(
    harness: Harness, output_dir: Path
) -> None:
    output_dir.mkdir(parents=True, exist_ok=True)
    spilled = output_dir / "spill.txt"
    spilled.write_text("full output\n")
    assert (await harness.ok("read", {"file_path": str(spilled)})).value["totalLines"] == 1
    grep = await harness.ok("grep", {"pattern": "full", "path": str(spilled)})
    assert grep.value["matches"][0]["path"] == str(spilled)
    failed = await harness.fail("write", {"file_path": str(spilled), "content": "x"})
    assert error_of(failed)[1] == OUTSIDE
    assert spilled.read_text() == "full output\n"


async def test_nul_in_a_path(harness: Harness) -> None:
    failed = await harness.fail("read", {"file_path": "a\x00b"})
    assert error_of(failed) == (
        'invalid path "a\\u0000b": contains a NUL character',
        "FS_INVALID_PATH",
    )


def test_no_writes_outside(tmp_path: Path) -> None:
    # The atomic writer's temp files live next to the target, i.e. inside the workspace.
    assert os.path.dirname(os.path.join(tmp_path, "x")) == str(tmp_path)
