"""Spill storage (LocalSpillStore) and the spill preview transform (reference §2.9)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemode.engine.policies._spill_preview import (
    build_spill_preview,
    spill_notice,
    spill_preview,
    utf8_head,
    utf8_len,
    utf8_tail,
)
from codemode.engine.policies._spill_store import (
    LOCAL_RETRIEVAL_HINT,
    LocalSpillStore,
    SpillStore,
    safe_file_name,
)

HINT = "Use read with offset/limit, or grep this path to search within it."


# Filesystem checks live in sync helpers: async test bodies stay free of blocking calls.
def _read(path: str | Path) -> str:
    return Path(path).read_text("utf-8")


def _mode(path: str | Path) -> int:
    return stat.S_IMODE(Path(path).stat().st_mode)


def _resolved(path: Path) -> Path:
    return path.resolve()


def _files_under(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file())


# --- LocalSpillStore ------------------------------------------------------------------------


def test_local_store_hint_is_the_reference_sentence(tmp_path: Path) -> None:
    store = LocalSpillStore(tmp_path)
    assert store.retrieval_hint == HINT == LOCAL_RETRIEVAL_HINT
    assert isinstance(store, SpillStore)


@pytest.mark.anyio
async def test_save_writes_the_full_text_to_a_private_file(tmp_path: Path) -> None:
    directory = tmp_path / "spill" / "session-1"
    store = LocalSpillStore(directory)
    assert not directory.exists()  # created on demand, not at construction
    text = "line 1\nhéllo 世界 😀\n" * 10_000
    locator = await store.save(text, suggested_name="bash.txt", label="result", call_id="c1")
    path = Path(locator)
    assert path.is_absolute()
    assert path.parent == _resolved(directory)
    assert path.name.endswith("-bash.txt")
    assert _read(path) == text
    assert _mode(path) == 0o600
    assert _mode(directory) == 0o700


@pytest.mark.anyio
async def test_each_save_gets_a_new_file(tmp_path: Path) -> None:
    store = LocalSpillStore(tmp_path)
    locators = [
        await store.save(f"text {n}", suggested_name="grep.txt", label="result") for n in range(20)
    ]
    assert len(set(locators)) == 20
    assert [_read(p) for p in locators] == [f"text {n}" for n in range(20)]


@pytest.mark.anyio
async def test_existing_directory_is_used_and_left_alone(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o755)
    store = LocalSpillStore(tmp_path)
    locator = await store.save("x", suggested_name="a.txt", label="dispatch", call_id="c:code:1")
    assert Path(locator).parent == _resolved(tmp_path)
    assert _mode(tmp_path) == 0o755


@pytest.mark.anyio
@pytest.mark.parametrize("size", [10, 64 << 10, (64 << 10) + 1, 1 << 20])
async def test_small_and_large_spills_are_written_whole(tmp_path: Path, size: int) -> None:
    # Up to 64 KiB from the event loop, above it from a worker thread: the same file.
    store = LocalSpillStore(tmp_path / "s")
    text = ("0123456789abcdef" * (size // 16 + 1))[:size]
    path = Path(await store.save(text, suggested_name="big.txt", label="result"))
    assert _read(path) == text and _mode(path) == 0o600


@pytest.mark.anyio
async def test_a_directory_removed_after_a_save_is_made_again(tmp_path: Path) -> None:
    directory = tmp_path / "spill"
    store = LocalSpillStore(directory)
    first = await store.save("one", suggested_name="a.txt", label="result")
    os.unlink(first)
    os.rmdir(directory)
    second = await store.save("two", suggested_name="a.txt", label="result")
    assert _read(Path(second)) == "two" and _mode(directory) == 0o700
    # Replaced by a file: refused, as at first use.
    os.unlink(second)
    os.rmdir(directory)
    os.close(os.open(directory, os.O_CREAT | os.O_WRONLY, 0o600))
    with pytest.raises(NotADirectoryError, match="not a directory"):
        await store.save("three", suggested_name="a.txt", label="result")


@pytest.mark.anyio
async def test_directory_path_that_is_a_file_fails(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.touch()
    with pytest.raises(NotADirectoryError, match="not a directory"):
        await LocalSpillStore(blocker).save("x", suggested_name="a.txt", label="result")


@pytest.mark.anyio
async def test_relative_directory_gives_absolute_locators(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    locator = await LocalSpillStore("rel").save("x", suggested_name="a.txt", label="result")
    assert os.path.isabs(locator)
    assert Path(locator).parent == _resolved(tmp_path / "rel")


@pytest.mark.anyio
async def test_lone_surrogates_are_written_as_replacement_characters(tmp_path: Path) -> None:
    locator = await LocalSpillStore(tmp_path).save(
        "a\ud800b\U0001f600", suggested_name="a.txt", label="result"
    )
    assert _read(locator) == "a\ufffdb\U0001f600"


@pytest.mark.parametrize(
    ("suggested", "expected"),
    [
        ("bash.txt", "bash.txt"),
        ("web_fetch.txt", "web_fetch.txt"),
        ("../../etc/passwd", "passwd"),
        ("/abs/path/x.txt", "x.txt"),
        ("dir\\win.txt", "win.txt"),
        ("..", "spill.txt"),
        ("", "spill.txt"),
        ("...hidden", "hidden"),
        ("my tool?.txt", "my_tool_.txt"),
        ("日本語.txt", "_.txt"),
        ("a\x00b.txt", "a_b.txt"),
        ("x" * 300 + ".txt", "x" * 92 + ".txt"),
        ("y" * 300, "y" * 96),
    ],
)
def test_safe_file_name(suggested: str, expected: str) -> None:
    assert safe_file_name(suggested) == expected


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_safe_file_name_is_always_a_bare_safe_name(suggested: str) -> None:
    name = safe_file_name(suggested)
    assert re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,95}", name)
    assert name not in (".", "..")


@pytest.mark.anyio
async def test_hostile_names_stay_inside_the_directory(tmp_path: Path) -> None:
    directory = tmp_path / "spill"
    store = LocalSpillStore(directory)
    for name in ["../escape.txt", "../../x", "/etc/passwd", "..", "a/../../b"]:
        locator = await store.save("x", suggested_name=name, label="result")
        assert Path(locator).parent == _resolved(directory)
    assert [p.parent for p in _files_under(tmp_path)] == [directory] * 5


# --- utf8 helpers -------------------------------------------------------------------------


def test_utf8_head_and_tail_cut_on_code_point_boundaries() -> None:
    s = "aé😀z"  # 1 + 2 + 4 + 1 bytes
    assert [utf8_head(s, n) for n in range(9)] == [
        "",
        "a",
        "a",
        "aé",
        "aé",
        "aé",
        "aé",
        "aé😀",
        "aé😀z",
    ]
    assert [utf8_tail(s, n) for n in range(9)] == [
        "",
        "z",
        "z",
        "z",
        "z",
        "😀z",
        "😀z",
        "é😀z",
        "aé😀z",
    ]
    assert utf8_head(s, 100) == utf8_tail(s, 100) == s
    with pytest.raises(ValueError, match="non-negative"):
        utf8_head(s, -1)
    with pytest.raises(TypeError, match="must be an int"):
        utf8_tail(s, True)


def test_utf8_len_counts_lone_surrogates_like_text_encoder() -> None:
    assert utf8_len("abc") == 3
    assert utf8_len("é😀") == 6
    assert utf8_len("\ud800") == 3
    # A pair spelled as two code points is the one character a JS string would hold.
    assert utf8_len("\ud83d\ude00") == 4
    assert utf8_len("\ude00\ud83d") == 6


@settings(max_examples=300, deadline=None)
@given(st.text(), st.integers(min_value=0, max_value=200))
def test_utf8_head_is_the_longest_fitting_prefix(s: str, n: int) -> None:
    head = utf8_head(s, n)
    assert s.startswith(head)
    assert utf8_len(head) <= n
    assert head == s or utf8_len(s[: len(head) + 1]) > n


@settings(max_examples=300, deadline=None)
@given(st.text(), st.integers(min_value=0, max_value=200))
def test_utf8_tail_is_the_longest_fitting_suffix(s: str, n: int) -> None:
    tail = utf8_tail(s, n)
    assert s.endswith(tail)
    assert utf8_len(tail) <= n
    assert tail == s or utf8_len(s[len(s) - len(tail) - 1 :]) > n


# --- the spill preview ------------------------------------------------------------------------


def test_notice_text_is_the_reference_format() -> None:
    assert spill_notice(4824, "/tmp/s/abc-pwsh.txt", HINT) == (
        "(Omitted 4824 bytes. Full formatted result stored at: /tmp/s/abc-pwsh.txt. "
        "Use read with offset/limit, or grep this path to search within it.)"
    )


def test_preview_worked_example_ascii() -> None:
    # Notice priced at the full size: "(Omitted 100 bytes. Full formatted result stored at:
    # /x. H)" is 59 bytes; + 2 for the blank line = 61; budget 90 - 61 = 29; head 15,
    # tail 14; omitted 100 - 29 = 71.
    text = "".join(chr(ord("a") + i % 26) for i in range(100))
    built = build_spill_preview(text, 90, "/x", "H")
    assert built is not None
    assert built.budget == 29
    assert built.head == text[:15]
    assert built.tail == text[-14:]
    assert built.omitted_bytes == 71
    assert built.text == (
        text[:15] + text[-14:] + "\n\n(Omitted 71 bytes. Full formatted result stored at: /x. H)"
    )
    assert utf8_len(built.text) == 89
    assert spill_preview(text, 90, "/x", "H") == built.text


def test_preview_worked_example_multibyte() -> None:
    # 50 x "é" = 100 bytes, same budget 29: the head's 15th byte would split an "é", so the
    # head keeps 14 bytes (7 chars); the tail keeps 14 bytes; omitted = 100 - 28 = 72.
    built = build_spill_preview("é" * 50, 90, "/x", "H")
    assert built is not None
    assert (built.head, built.tail, built.omitted_bytes) == ("é" * 7, "é" * 7, 72)
    assert built.text == "é" * 14 + "\n\n(Omitted 72 bytes. Full formatted result stored at: /x. H)"


def test_preview_with_an_empty_budget_is_the_notice_alone() -> None:
    # A cap that only fits the notice: no preview and no blank line (the reference joins
    # with "\n\n" only when the preview is non-empty).
    text = "x" * 1000
    notice = spill_notice(1000, "/x", "H")
    assert spill_preview(text, utf8_len(notice), "/x", "H") == notice
    assert spill_preview(text, utf8_len(notice) + 1, "/x", "H") == notice
    # Budget 1: the head gets ceil(1/2) = 1 byte, the tail 0.
    built = build_spill_preview(text, utf8_len(notice) + 3, "/x", "H")
    assert built is not None
    assert built.text == "x\n\n(Omitted 999 bytes. Full formatted result stored at: /x. H)"


def test_preview_refuses_when_even_the_notice_does_not_fit() -> None:
    text = "x" * 1000
    notice = spill_notice(1000, "/a/long/locator", HINT)
    assert spill_preview(text, utf8_len(notice) - 1, "/a/long/locator", HINT) is None
    assert spill_preview(text, 0, "/a/long/locator", HINT) is None


def test_preview_is_not_needed_when_the_text_fits() -> None:
    assert build_spill_preview("x" * 10, 10, "/x", "H") is None
    assert build_spill_preview("", 0, "/x", "H") is None


@pytest.mark.parametrize(("cap", "error"), [(-1, ValueError), (1.5, TypeError), (True, TypeError)])
def test_preview_rejects_a_bad_cap(cap: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        build_spill_preview("x", cap, "/x", "H")  # type: ignore[arg-type]


_texts = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(["a", "é", "世", "😀", "\n"]),
    ),
    max_size=400,
)
_NOTICE_RE = re.compile(
    r"\(Omitted (\d+) bytes\. Full formatted result stored at: (.*)\. (.*)\)", re.DOTALL
)


@settings(max_examples=500, deadline=None)
@given(
    text=_texts,
    cap=st.integers(min_value=0, max_value=1200),
    locator=st.text(min_size=1, max_size=40),
    hint=st.sampled_from([HINT, "", "Use the stub retrieval path.", "読む"]),
)
def test_preview_properties(text: str, cap: int, locator: str, hint: str) -> None:
    total = utf8_len(text)
    built = build_spill_preview(text, cap, locator, hint)
    # Exactly when a replacement exists: the text is over the cap and the notice priced
    # at the full size fits under it.
    expected_some = total > cap and utf8_len(spill_notice(total, locator, hint)) <= cap
    assert (built is not None) == expected_some
    if built is None:
        assert spill_preview(text, cap, locator, hint) is None
        return
    # Never over the cap, hence always smaller than the original.
    assert utf8_len(built.text) <= cap < total
    # Budget and split.
    reserve = utf8_len(spill_notice(total, locator, hint)) + 2
    assert built.budget == max(0, cap - reserve)
    assert utf8_len(built.head) <= (built.budget + 1) // 2
    assert utf8_len(built.tail) <= built.budget // 2
    # Head and tail are whole-code-point prefix/suffix, maximal within their shares.
    assert text.startswith(built.head)
    assert text.endswith(built.tail)
    assert built.head == utf8_head(text, (built.budget + 1) // 2)
    assert built.tail == utf8_tail(text, built.budget // 2)
    # N is the exact number of bytes not shown.
    assert built.omitted_bytes == total - utf8_len(built.head) - utf8_len(built.tail)
    # The exact layout.
    preview = built.head + built.tail
    assert built.notice == spill_notice(built.omitted_bytes, locator, hint)
    assert built.text == (f"{preview}\n\n{built.notice}" if preview else built.notice)
    match = _NOTICE_RE.fullmatch(built.notice)
    assert match is not None
    assert int(match.group(1)) == built.omitted_bytes


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(max_size=200).map(lambda s: s + "\ud800" + s),
    cap=st.integers(min_value=0, max_value=400),
)
def test_preview_with_lone_surrogates_stays_within_the_cap(text: str, cap: int) -> None:
    result = spill_preview(text, cap, "/x", "H")
    if result is not None:
        assert utf8_len(result) <= cap
        result.encode("utf-8")  # well-formed: the surrogate became U+FFFD
