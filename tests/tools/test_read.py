"""``read``: windows, caps, text decoding, errors, cards — through ``rt.execute``."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode.engine._presentation import validate_card
from tests.tools.conftest import Harness, error_of, text_of

pytestmark = pytest.mark.anyio


def envelope(path: Path, body: str) -> str:
    return f"<path>{path}</path>\n<type>file</type>\n<content>\n{body}\n</content>"


async def test_whole_file(harness: Harness, workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\ntwo\n")
    result = await harness.ok("read", {"file_path": "a.txt"})
    assert result.value == {
        "path": str(workspace / "a.txt"),
        "offset": 1,
        "lines": [{"number": 1, "text": "one"}, {"number": 2, "text": "two"}],
        "totalLines": 2,
    }
    assert text_of(result) == envelope(
        workspace / "a.txt", "1: one\n2: two\n\n(End of file - total 2 lines)"
    )


@pytest.mark.parametrize(
    ("data", "total", "texts"),
    [
        (b"a\nb\n", 2, ["a", "b"]),
        (b"a\nb", 2, ["a", "b"]),
        (b"", 0, []),
        (b"\n", 1, [""]),
        (b"\n\n", 2, ["", ""]),
        (b"x\r\ny\r\n", 2, ["x", "y"]),
        (b"x\r\r\n", 1, ["x\r"]),
        (b"\xef\xbb\xbfbom\n", 1, ["bom"]),
        ("é中😀\n".encode(), 1, ["é中😀"]),
        (b"a\x00b\n" * 3000, 3000, None),  # NUL only counts in the first 8192 bytes
    ],
)
async def test_line_splitting(
    harness: Harness, workspace: Path, data: bytes, total: int, texts: list[str] | None
) -> None:
    if texts is None:
        data = b"x" * 9000 + b"\n" + data
        total += 1
    (workspace / "f").write_bytes(data)
    value = (await harness.ok("read", {"file_path": "f"})).value
    assert value["totalLines"] == total
    if texts is not None:
        assert [line["text"] for line in value["lines"]] == texts


async def test_empty_file_reads_fine_at_offset_one(harness: Harness, workspace: Path) -> None:
    (workspace / "e").write_bytes(b"")
    result = await harness.ok("read", {"file_path": "e"})
    assert text_of(result) == envelope(workspace / "e", "(End of file - total 0 lines)")
    failed = await harness.fail("read", {"file_path": "e", "offset": 2})
    assert error_of(failed) == (
        f'offset 2 is out of range for "{workspace / "e"}" (0 lines)',
        "FS_NOT_FOUND",
    )


async def test_window_and_continuation_footer(harness: Harness, workspace: Path) -> None:
    (workspace / "n").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    result = await harness.ok("read", {"file_path": "n", "offset": 3, "limit": 2})
    assert [line["number"] for line in result.value["lines"]] == [3, 4]
    assert result.value["offset"] == 3
    assert text_of(result).endswith(
        "3: line 3\n4: line 4\n\n(Showing lines 3-4 of 10. Use offset=5 to continue.)\n</content>"
    )
    tail = await harness.ok("read", {"file_path": "n", "offset": 9, "limit": 5})
    assert text_of(tail).endswith("(End of file - total 10 lines)\n</content>")
    # JSON numbers that are integral count as integers.
    same = await harness.ok("read", {"file_path": "n", "offset": 3.0, "limit": 2.0})
    assert same.value == result.value


async def test_offset_past_the_end(harness: Harness, workspace: Path) -> None:
    (workspace / "n").write_text("a\nb\n")
    failed = await harness.fail("read", {"file_path": "n", "offset": 3})
    assert error_of(failed) == (
        f'offset 3 is out of range for "{workspace / "n"}" (2 lines)',
        "FS_NOT_FOUND",
    )


async def test_long_lines_are_cut_in_utf16_units(harness: Harness, workspace: Path) -> None:
    long_ascii = "x" * 2500
    astral = "😀" * 1500  # 3000 UTF-16 units
    exact = "y" * 2000 + "\r"
    (workspace / "l").write_text(f"{long_ascii}\n{astral}\n{exact}\n", newline="")
    lines = (await harness.ok("read", {"file_path": "l"})).value["lines"]
    suffix = "... (line truncated to 2000 chars)"
    assert lines[0]["text"] == "x" * 2000 + suffix
    assert lines[1]["text"] == "😀" * 1000 + suffix
    assert lines[2]["text"] == "y" * 2000


async def test_byte_budget_caps_the_window(harness: Harness, workspace: Path) -> None:
    # 100 lines of 1000 bytes: 51 fit in 51,200 bytes (51 * 1000 + 50 newlines).
    (workspace / "big").write_text("".join("z" * 1000 + "\n" for _ in range(100)))
    result = await harness.ok("read", {"file_path": "big"})
    assert len(result.value["lines"]) == 51
    assert result.value["totalLines"] == 100
    assert text_of(result).endswith(
        "(Output capped. Showing lines 1-51. Use offset=52 to continue.)\n</content>"
    )


async def test_byte_budget_counts_utf8_bytes(harness: Harness, workspace: Path) -> None:
    # 1900 three-byte characters = 5700 bytes a line: 8 lines cost 45,607 bytes, 9 cost 51,308.
    (workspace / "wide").write_text(("中" * 1900 + "\n") * 10)
    value = (await harness.ok("read", {"file_path": "wide"})).value
    assert len(value["lines"]) == 8


async def test_large_file_is_streamed_with_the_same_result(
    harness: Harness, workspace: Path
) -> None:
    line = "0123456789" * 10 + "\n"  # 101 bytes
    count = 11 * 1024 * 1024 // len(line)
    (workspace / "huge").write_text(line * count)
    value = (await harness.ok("read", {"file_path": "huge", "offset": count - 1})).value
    assert value["totalLines"] == count
    assert [entry["number"] for entry in value["lines"]] == [count - 1, count]


async def test_window_across_chunk_boundaries(harness: Harness, workspace: Path) -> None:
    # Lines straddle the 1 MiB read chunks; every line must come back intact.
    lines = [f"{i}:" + "q" * (i % 997) for i in range(4000)]
    (workspace / "c").write_text("\n".join(lines))
    offset = 1
    seen: list[str] = []
    while True:
        value = (await harness.ok("read", {"file_path": "c", "offset": offset})).value
        seen += [entry["text"] for entry in value["lines"]]
        offset = value["lines"][-1]["number"] + 1
        if offset > value["totalLines"]:
            break
    assert seen == lines


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"file_path": ""}, "file_path must be a non-empty string"),
        ({"file_path": "   "}, "file_path must be a non-empty string"),
        ({"file_path": "a", "offset": 0}, "offset must be a positive integer"),
        ({"file_path": "a", "offset": -1}, "offset must be a positive integer"),
        ({"file_path": "a", "offset": 1.5}, "offset must be a positive integer"),
        ({"file_path": "a", "limit": 0}, "limit must be a positive integer"),
        ({"file_path": "a", "limit": 2.5}, "limit must be a positive integer"),
        ({"file_path": "a", "limit": 2001}, "limit must be less than or equal to 2000"),
    ],
)
async def test_value_errors(harness: Harness, args: dict[str, object], message: str) -> None:
    assert error_of(await harness.fail("read", args)) == (message, "FS_INVALID_ARGS")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, 'missing required property "file_path"'),
        ({"file_path": 3}, '"file_path" must be a string'),
        ({"file_path": "a", "offset": "1"}, '"offset" must be a number'),
        ({"file_path": "a", "limit": True}, '"limit" must be a number'),
        ({"file_path": "a", "limit": None}, '"limit" must be a number'),
    ],
)
async def test_schema_errors(harness: Harness, args: dict[str, object], message: str) -> None:
    failed = await harness.fail("read", args)
    assert error_of(failed) == (f"invalid arguments: {message}", "INVALID_ARGS")


async def test_file_errors(harness: Harness, workspace: Path) -> None:
    (workspace / "dir").mkdir()
    (workspace / "bin").write_bytes(b"abc\x00def")
    (workspace / "latin").write_bytes(b"caf\xe9\n")
    (workspace / "file").write_text("x")
    cases = {
        "missing": ("not found", "FS_NOT_FOUND"),
        "dir": ("not a regular file", "FS_NOT_REGULAR_FILE"),
        "bin": ("binary file", "FS_NOT_TEXT"),
        "latin": ("invalid UTF-8 text", "FS_NOT_TEXT"),
    }
    for name, (what, code) in cases.items():
        failed = await harness.fail("read", {"file_path": name})
        assert error_of(failed) == (f'cannot read "{workspace / name}": {what}', code)
    failed = await harness.fail("read", {"file_path": "file/child"})
    assert error_of(failed) == (
        f'cannot resolve "{workspace / "file/child"}": a parent path segment is not a directory',
        "FS_NOT_FOUND",
    )


async def test_absolute_paths_inside_the_workspace(harness: Harness, workspace: Path) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub" / "x").write_text("hi\n")
    value = (await harness.ok("read", {"file_path": str(workspace / "sub" / "x")})).value
    assert value["path"] == str(workspace / "sub" / "x")
    dotted = (await harness.ok("read", {"file_path": "sub/../sub/./x"})).value
    assert dotted["path"] == str(workspace / "sub" / "x")


async def test_is_parallel_safe(harness: Harness) -> None:
    from codemode.engine import AbortController, ToolExecutionInput

    call = ToolExecutionInput(
        call_id="c", name="read", arguments={"file_path": "a"}, signal=AbortController().signal
    )
    assert harness.rt.execution_mode(call) == "parallel"


async def test_cards(harness: Harness, workspace: Path) -> None:
    tool = harness.rt.get("read")
    assert tool is not None and tool.present_call is not None
    assert tool.present_call({"file_path": "a.py", "offset": 5, "limit": 10}) == {
        "card": "generic",
        "title": "Read a.py (5 - 14)",
        "kind": "read",
        "locations": [{"path": "a.py", "line": 5}],
    }
    assert (
        tool.present_call({"file_path": "a.py", "offset": 7})["title"] == "Read a.py (from line 7)"
    )
    assert tool.present_call({"file_path": "a.py", "limit": 3})["title"] == "Read a.py (1 - 3)"
    assert tool.present_call({"file_path": "a.py"})["title"] == "Read a.py"
    (workspace / "a.py").write_text("print(1)\n")
    result = await harness.ok("read", {"file_path": "a.py"})
    assert result.meta == {
        "path": str(workspace / "a.py"),
        "offset": 1,
        "lines": 1,
        "totalLines": 1,
        "lang": "py",
    }
    assert tool.present_result is not None
    assert tool.present_result({"file_path": "a.py"}, result) == {
        "card": "read",
        "path": str(workspace / "a.py"),
        "offset": 1,
        "lines": [{"number": 1, "text": "print(1)"}],
        "totalLines": 1,
        "lang": "py",
    }
    # The card is one the engine's vocabulary accepts, so the session log stores it.
    assert validate_card(tool.present_result({"file_path": "a.py"}, result), phase="result")
    (workspace / ".env").write_text("A=1\n")
    dotfile = await harness.ok("read", {"file_path": ".env"})
    assert "lang" not in dotfile.meta
    failed = await harness.fail("read", {"file_path": "nope"})
    assert tool.present_result({"file_path": "nope"}, failed) is None


async def test_nested_calls_have_no_meta(harness: Harness, workspace: Path) -> None:
    (workspace / "a").write_text("x\n")
    result = await harness.ok("read", {"file_path": "a"}, parent=object())
    assert result.meta is None
