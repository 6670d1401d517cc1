"""HTML to Markdown for ``web_fetch``'s rendering (markdownify over BeautifulSoup).

The source is cut at ``max_source_chars`` (UTF-16 units) first, so a huge page costs a bounded
amount of work. ``script``, ``style``, ``noscript`` and ``template`` are removed; tables
become GFM tables (the first row is the header when the page has none); headings are ATX
(``#``). When the element nesting is deeper than ``max_depth`` (512) — or the converter
fails for any other reason, e.g. its recursion running out — the (cut) HTML is returned
as-is, which is still readable and never crashes the call. The nesting is measured
iteratively, before any recursive code sees the tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._text import utf16_head, utf16_len

if TYPE_CHECKING:
    from bs4 import Tag

__all__ = ["Converted", "html_to_markdown", "nesting_depth"]

_REMOVED = ("script", "style", "noscript", "template")


@dataclass(frozen=True)
class Converted:
    """The Markdown (or raw HTML fallback) of a page and whether the source was cut."""

    text: str
    source_cut: bool
    converted: bool


def nesting_depth(soup: Tag) -> int:
    """The deepest element nesting under ``soup`` (iterative: no recursion limit)."""
    from bs4 import Tag

    deepest = 0
    stack: list[tuple[Tag, int]] = [(soup, 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in node.children if isinstance(child, Tag))
    return deepest


def html_to_markdown(
    html: str, *, max_source_chars: int = 200_000, max_depth: int = 512
) -> Converted:
    """Convert ``html`` (cut at ``max_source_chars``) to Markdown; see the module docstring."""
    # Imported here: BeautifulSoup and markdownify cost ~100 ms to import, paid only by a
    # fetch that renders HTML, not by every process that builds the tools.
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    source_cut = len(html) > max_source_chars or utf16_len(html) > max_source_chars
    if source_cut:
        html = utf16_head(html, max_source_chars)
    try:
        soup = BeautifulSoup(html, "html.parser")
        if nesting_depth(soup) > max_depth:
            return Converted(html, source_cut, False)
        for tag in soup.find_all(_REMOVED):
            tag.decompose()
        converter = MarkdownConverter(
            heading_style="atx",
            bullets="-",
            table_infer_header=True,
            escape_misc=False,
            newline_style="backslash",
        )
        text = converter.convert_soup(soup)
    except (RecursionError, MemoryError):
        return Converted(html, source_cut, False)
    except Exception:  # the converter choking on odd markup: keep the raw page
        return Converted(html, source_cut, False)
    return Converted(_tidy(text), source_cut, True)


def _tidy(text: str) -> str:
    # markdownify leaves runs of blank lines where removed blocks were; keep at most one.
    out: list[str] = []
    blank = False
    for line in text.strip("\n").split("\n"):
        if not line.strip():
            if not blank and out:
                out.append("")
            blank = True
            continue
        blank = False
        out.append(line)
    return "\n".join(out)
