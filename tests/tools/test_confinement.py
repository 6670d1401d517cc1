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


# -- physical resolution: links to ancestors, `..` after a link --------------------------


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with the kernel resolver and with the O_NOFOLLOW walk (its fallback)."""
    from codemode.tools.fs import _paths

    if request.param == "walk":
        monkeypatch.setattr(_paths, "_OPENAT2", False)
    elif not _paths.openat2_available():
        pytest.skip("this kernel has no openat2")
    return str(request.param)


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A secret beside the workspace, reachable lexically-inside only through `..`."""
    secret_dir = tmp_path / "secret-dir"
    secret_dir.mkdir()
    (secret_dir / "shadow").write_text("SECRET-shadow\n")
    return secret_dir


def _ancestor_paths(workspace: Path) -> list[str]:
    (workspace / "self").symlink_to(".")
    (workspace / "docs").mkdir()
    (workspace / "shared").mkdir()
    (workspace / "shared" / "note.txt").write_text("shared note\n")
    (workspace / "docs" / "shared").symlink_to("../shared")
    # Lexically each of these stays inside; physically each `..` after the link climbs out.
    return [
        "self/self/../secret-dir/shadow",
        "self/../secret-dir/shadow",
        "docs/shared/../../secret-dir/shadow",
        f"{workspace}/self/../secret-dir/shadow",
    ]


ANCESTOR_CALLS: list[tuple[str, Any]] = [
    ("read", lambda p: {"file_path": p}),
    ("write", lambda p: {"file_path": p, "content": "x"}),
    ("edit", lambda p: {"file_path": p, "old_string": "SECRET", "new_string": "x"}),
    ("str_replace_editor", lambda p: {"command": "view", "path": p}),
    ("str_replace_editor", lambda p: {"command": "create", "path": p + "-new", "file_text": "x"}),
    ("glob", lambda p: {"pattern": "*", "path": p.rsplit("/", 1)[0]}),
    ("grep", lambda p: {"pattern": "SECRET", "path": p}),
    ("grep", lambda p: {"pattern": "SECRET", "path": p.rsplit("/", 1)[0]}),
]


@pytest.mark.parametrize(("name", "make"), ANCESTOR_CALLS)
async def test_dot_dot_after_a_link_to_an_ancestor_is_refused(
    harness: Harness, workspace: Path, planted: Path, resolver: str, name: str, make: Any
) -> None:
    for raw in _ancestor_paths(workspace):
        result = await harness.call(name, make(raw))
        assert result.is_error, (raw, result.to_json())
        message, code = error_of(result)
        assert code == OUTSIDE, (raw, message)
        assert "SECRET" not in str(result.to_json())
    assert sorted(os.listdir(planted)) == ["shadow"]
    assert (planted / "shadow").read_text() == "SECRET-shadow\n"


async def test_links_to_ancestors_inside_still_work(
    harness: Harness, workspace: Path, planted: Path, resolver: str
) -> None:
    _ancestor_paths(workspace)
    value = (await harness.ok("read", {"file_path": "docs/shared/note.txt"})).value
    assert value["lines"] == [{"number": 1, "text": "shared note"}]
    value = (await harness.ok("read", {"file_path": "self/self/docs/../shared/note.txt"})).value
    assert value["totalLines"] == 1
    grep = await harness.ok("grep", {"pattern": "note", "path": "docs/shared"})
    # ripgrep got the resolved path; the match is reported where the file really is.
    assert grep.value == {
        "matches": [{"path": "shared/note.txt", "lineNumber": 1, "line": "shared note"}]
    }
    glob = await harness.ok("glob", {"pattern": "*.txt", "path": "self/docs/shared"})
    assert glob.value == {"root": "shared", "paths": ["shared/note.txt"]}
    await harness.ok("write", {"file_path": "docs/shared/new.txt", "content": "n\n"})
    assert (workspace / "shared" / "new.txt").read_text() == "n\n"


async def test_a_relative_link_climbing_out_is_refused(
    harness: Harness, workspace: Path, planted: Path, resolver: str
) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub" / "up").symlink_to("../../secret-dir")
    for name, make in ANCESTOR_CALLS:
        result = await harness.call(name, make("sub/up/shadow"))
        message, code = error_of(result)
        assert code == OUTSIDE, (name, message)
        assert "a symbolic link leads outside the workspace" in message


async def test_ripgrep_itself_cannot_read_outside_the_root(workspace: Path, planted: Path) -> None:
    """The kernel-side net under grep/glob: even handed an outside path, a confined rg
    gets EACCES (this is what a directory swapped mid-walk runs into)."""
    from codemode.engine import AbortController
    from codemode.tools import SearchError
    from codemode.tools.search._rg import landlock_abi, run_rg

    if landlock_abi() == 0:
        pytest.skip("this kernel has no Landlock")
    (workspace / "in.txt").write_text("SECRET-inside-is-fine\n")
    with pytest.raises(SearchError) as caught:
        await run_rg(
            ["--no-config", "-e", "SECRET", "--", str(planted / "shadow"), "in.txt"],
            cwd=str(workspace),
            signal=AbortController().signal,
            tool="grep",
            raw_cap=1 << 20,
            stderr_cap=1 << 16,
            confine=str(workspace),
        )
    assert "Permission denied" in caught.value.message
    assert "SECRET-shadow" not in caught.value.message


# -- FIFOs, sockets, devices: refused at once by every tool ------------------------------


def _specials(workspace: Path) -> list[str]:
    import socket

    os.mkfifo(workspace / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(workspace / "sock"))
    sock.close()
    os.mknod(workspace / "null-dev", 0o600 | __import__("stat").S_IFCHR, os.makedev(1, 3))
    return ["fifo", "sock", "null-dev"]


SPECIAL_CALLS: list[tuple[str, Any]] = [
    ("read", lambda p: {"file_path": p}),
    ("write", lambda p: {"file_path": p, "content": "x"}),
    ("edit", lambda p: {"file_path": p, "old_string": "a", "new_string": "b"}),
    ("str_replace_editor", lambda p: {"command": "view", "path": p}),
    ("str_replace_editor", lambda p: {"command": "str_replace", "path": p, "old_str": "a"}),
    (
        "str_replace_editor",
        lambda p: {"command": "insert", "path": p, "insert_line": 0, "new_str": "a"},
    ),
    ("grep", lambda p: {"pattern": "x", "path": p}),
    ("glob", lambda p: {"pattern": "*", "path": p}),
]


@pytest.mark.parametrize(("name", "make"), SPECIAL_CALLS)
async def test_fifos_sockets_and_devices_are_refused_at_once(
    harness: Harness, workspace: Path, name: str, make: Any
) -> None:
    import anyio

    for special in _specials(workspace):
        # A FIFO opened for reading with no writer would block: the call must not.
        with anyio.fail_after(20):
            result = await harness.call(name, make(special))
        message, code = error_of(result)
        assert code == "FS_NOT_REGULAR_FILE", (special, message)
    assert (workspace / "fifo").exists() and not (workspace / "fifo").is_file()


async def test_read_image_refuses_a_fifo(tmp_path: Path, workspace: Path) -> None:
    import anyio

    h = Harness(workspace, tmp_path / "rt", accepts_images=True)
    os.mkfifo(workspace / "pic.png")
    with anyio.fail_after(20):
        result = await h.fail("read_image", {"file_path": "pic.png"})
    assert error_of(result)[1] == "FS_NOT_REGULAR_FILE"


async def test_search_over_a_directory_holding_a_fifo_finishes(
    harness: Harness, workspace: Path
) -> None:
    import anyio

    _specials(workspace)
    (workspace / "a.txt").write_text("needle\n")
    with anyio.fail_after(20):
        grep = await harness.ok("grep", {"pattern": "needle"})
        glob = await harness.ok("glob", {"pattern": "*"})
    assert grep.value == {"matches": [{"path": "a.txt", "lineNumber": 1, "line": "needle"}]}
    assert glob.value["paths"] == ["a.txt"]


# -- hard links -------------------------------------------------------------------------


async def test_hardlinked_files_are_refused(
    harness: Harness, workspace: Path, planted: Path
) -> None:
    os.link(planted / "shadow", workspace / "alias")
    (workspace / "plain.txt").write_text("SECRET-free\n")
    for name, args in [
        ("read", {"file_path": "alias"}),
        ("write", {"file_path": "alias", "content": "x"}),
        ("edit", {"file_path": "alias", "old_string": "SECRET", "new_string": "x"}),
        ("str_replace_editor", {"command": "view", "path": "alias"}),
        ("str_replace_editor", {"command": "str_replace", "path": "alias", "old_str": "S"}),
        ("grep", {"pattern": "SECRET", "path": "alias"}),
    ]:
        result = await harness.call(name, args)
        message, code = error_of(result)
        assert code == "FS_HARDLINKED", (name, message)
        assert "SECRET-shadow" not in str(result.to_json())
    # Searching the whole tree skips the hard-linked file's matches and keeps the rest.
    grep = await harness.ok("grep", {"pattern": "SECRET"})
    assert grep.value == {
        "matches": [{"path": "plain.txt", "lineNumber": 1, "line": "SECRET-free"}]
    }
    assert (planted / "shadow").read_text() == "SECRET-shadow\n"


@pytest.mark.parametrize(("inline_stats", "threaded"), [(256, False), (3, False), (2, True)])
async def test_hardlinked_matches_are_dropped_inline_or_in_a_thread(
    harness: Harness,
    workspace: Path,
    planted: Path,
    monkeypatch: pytest.MonkeyPatch,
    inline_stats: int,
    threaded: bool,
) -> None:
    import anyio.to_thread

    from codemode.tools.search import _grep

    # The hard-link check is the Landlock path's (without Landlock every match is re-read
    # through confined descriptors instead): taken here whatever this kernel has.
    monkeypatch.setattr(_grep, "confined_by_kernel", lambda: True)
    os.link(planted / "shadow", workspace / "alias")
    (workspace / "a.txt").write_text("SECRET-a\n" * 4)
    (workspace / "b.txt").write_text("SECRET-b\n")
    monkeypatch.setattr(_grep, "_INLINE_STATS", inline_stats)
    in_threads: list[str] = []
    run_sync = anyio.to_thread.run_sync

    async def spy(fn: Any, *args: Any, **kwargs: Any) -> Any:
        in_threads.append(getattr(fn, "__name__", ""))
        return await run_sync(fn, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", spy)
    grep = await harness.ok("grep", {"pattern": "SECRET"})
    assert sorted(m["path"] for m in grep.value["matches"]) == ["a.txt"] * 4 + ["b.txt"]
    assert "SECRET-shadow" not in str(grep.to_json())
    # Six matches in three files (one hard-linked): the files, not the matches, are
    # counted against the limit for stat'ing them on the loop.
    assert ("_without_hardlinked" in in_threads) is threaded


def _write_bytes_named(path: bytes, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


@pytest.mark.parametrize("kernel_confined", [True, False])
async def test_grep_reports_matches_in_files_whose_names_are_not_utf8(
    harness: Harness,
    workspace: Path,
    planted: Path,
    monkeypatch: pytest.MonkeyPatch,
    kernel_confined: bool,
) -> None:
    # ripgrep names such a file by its bytes (base64). Its matches are shown under the
    # name with U+FFFD (as glob shows it), and every check that opens or stats the file
    # (hard links; without Landlock, re-reading the line) uses the name on disk.
    from codemode.tools.search import _grep

    monkeypatch.setattr(_grep, "confined_by_kernel", lambda: kernel_confined)
    ws = os.fsencode(workspace)
    _write_bytes_named(os.path.join(ws, b"caf\xe9.txt"), "needle one\n")
    (workspace / "plain.txt").write_text("needle two\n")
    # A hard link to a file outside, under a name that is not UTF-8: still left out.
    os.link(planted / "shadow", os.path.join(ws, b"alias\xff"))
    grep = await harness.ok("grep", {"pattern": "needle|SECRET"})
    assert sorted((m["path"], m["line"]) for m in grep.value["matches"]) == [
        ("caf\ufffd.txt", "needle one"),
        ("plain.txt", "needle two"),
    ]
    assert "SECRET-shadow" not in str(grep.to_json())


async def test_grep_leaves_out_files_shown_alike(harness: Harness, workspace: Path) -> None:
    # b"x\xff", b"x\xfe" and a file really named "x\ufffd" all show as "x\ufffd": no
    # shown path may stand for two files (one file's checks would vouch for another's
    # lines), so their matches are left out and the rest kept.
    ws = os.fsencode(workspace)
    for name in (b"x\xff", b"x\xfe", "x\ufffd".encode()):
        _write_bytes_named(os.path.join(ws, name), "needle\n")
    (workspace / "y.txt").write_text("needle\n")
    grep = await harness.ok("grep", {"pattern": "needle"})
    assert grep.value == {"matches": [{"path": "y.txt", "lineNumber": 1, "line": "needle"}]}


async def test_hardlinks_can_be_allowed(tmp_path: Path, workspace: Path) -> None:
    (workspace / "a").write_text("one\n")
    os.link(workspace / "a", workspace / "b")
    h = Harness(workspace, tmp_path / "rt", allow_hardlinks=True)
    assert (await h.ok("read", {"file_path": "b"})).value["totalLines"] == 1
    assert len((await h.ok("grep", {"pattern": "one"})).value["matches"]) == 2


# -- writes leave nothing behind ---------------------------------------------------------


async def test_writes_leave_no_temp_files(harness: Harness, workspace: Path) -> None:
    await harness.ok("write", {"file_path": "a/b.txt", "content": "x\n"})
    await harness.ok("edit", {"file_path": "a/b.txt", "old_string": "x", "new_string": "y"})
    await harness.ok(
        "str_replace_editor", {"command": "create", "path": "a/c.txt", "file_text": "c"}
    )
    assert sorted(os.listdir(workspace / "a")) == ["b.txt", "c.txt"]


async def test_write_replaces_a_link_swapped_in_instead_of_following_it(
    harness: Harness, workspace: Path, planted: Path
) -> None:
    """The final rename happens on the parent's descriptor: a name that became a link to
    outside is refused when seen, and were it swapped in later it would be replaced."""
    (workspace / "t.txt").symlink_to(planted / "shadow")
    failed = await harness.fail("write", {"file_path": "t.txt", "content": "x"})
    assert error_of(failed)[1] == OUTSIDE
    assert (planted / "shadow").read_text() == "SECRET-shadow\n"
