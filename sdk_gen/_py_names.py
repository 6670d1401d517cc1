"""Python flavour: which names may be emitted bare, class naming, and text escaping.

Everything here protects one invariant: the fenced block must be valid Python source
for any tool name or schema. Identifier checks use CPython's own ``str.isidentifier()``
plus an NFKC stability check rather than JavaScript's Unicode tables: a name JavaScript
accepts can still be invalid Python, and only CPython's own check is exact.
"""

from __future__ import annotations

import keyword
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Final

from ._text import collapse_whitespace

__all__ = [
    "MAX_CLASS_NAME_BASE",
    "MAX_LIST_NESTING",
    "ClassNames",
    "camel_case",
    "child_class_name",
    "describe",
    "docstring",
    "is_field_name",
    "is_method_name",
]

MAX_CLASS_NAME_BASE: Final = 120
"""Cap on a class-name base, keeping names (and the whole text) linear in schema depth."""

MAX_LIST_NESTING: Final = 180
"""Deepest ``list[`` chain before degrading to ``Any``.

CPython's tokenizer refuses a line with more than 200 open brackets; 180 leaves room for
the few brackets an annotation adds around the chain (``NotRequired[``, ``Literal[``,
the method's ``(``).
"""

# C0 controls (minus TAB..CR, which the whitespace fold already removed), DEL and the C1
# controls: NUL makes CPython reject the source outright and the rest are invisible.
# A lone surrogate cannot be encoded as UTF-8, so it would make the source uncompilable.
# One pass finds both kinds (`_visible` tells them apart by code point).
_UNPRINTABLE_OR_SURROGATE: Final = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
# ASCII letters and digits: what `_is_xid_continue` keeps of an ASCII name, but `_`.
_ASCII_WORD: Final = re.compile("[A-Za-z0-9]+")


def _nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def is_bare_identifier(name: str) -> bool:
    """Whether ``name`` can be written bare and still mean exactly ``name``.

    CPython NFKC-normalises identifiers while JSON keys compare as written, so ``ﬁeld``
    would declare ``field``: such names take the subscript / ``dict[str, Any]`` path.
    """
    return name.isidentifier() and _nfkc(name) == name


def _is_reserved(name: str) -> bool:
    # Hard keywords only: soft keywords (`match`, `case`, `type`, `_`) are legal field
    # and method names. `__debug__` is not a keyword but cannot be assigned.
    return keyword.iskeyword(name) or name == "__debug__"


def is_field_name(name: str) -> bool:
    """Whether a property can be a class-syntax ``TypedDict`` field."""
    # A non-dunder `__x` would be name-mangled inside the class body and so declare a
    # different key than the schema's.
    mangled = name.startswith("__") and not name.endswith("__")
    return is_bare_identifier(name) and not _is_reserved(name) and not mangled


def is_method_name(name: str) -> bool:
    """Whether a tool can be a ``Tools`` method (else it is a subscript comment)."""
    # Underscore-leading names are legal attributes but unsafe ones: `__x` mangles at the
    # call site and dunders resolve on `object` before the bindings proxy sees them.
    return is_bare_identifier(name) and not _is_reserved(name) and not name.startswith("_")


def _is_xid_continue(char: str) -> bool:
    return ("a" + char).isidentifier()


def _is_xid_start(char: str) -> bool:
    return char != "_" and char.isidentifier()


def camel_case(raw: str) -> str:
    """``read_file`` → ``ReadFile``; ``my-tool`` → ``MyTool``; ``1x`` → ``Tool1x``.

    Non-identifier characters and underscores split words; a result that cannot start an
    identifier gets a ``Tool`` prefix. The result is NFKC-normalised (after the prefix,
    since ``Tool`` plus a combining mark can compose) so that what CPython compiles is
    what was emitted.
    """
    if raw.isascii():
        # The same rules, spelled for ASCII (every tool and field name a render meets,
        # in practice): the words are the runs of letters and digits, case mapping and
        # NFKC change nothing else, and only a letter starts an identifier.
        joined = "".join(word[0].upper() + word[1:] for word in _ASCII_WORD.findall(raw))
        return joined if joined[:1].isalpha() else "Tool" + joined
    return _camel_case_any(raw)


def _camel_case_any(raw: str) -> str:
    """``camel_case`` for any text (a test checks the ASCII path against this one)."""
    parts: list[str] = []
    current: list[str] = []
    for char in raw:
        if char != "_" and _is_xid_continue(char):
            current.append(char)
        elif current:
            parts.append("".join(current))
            current = []
    if current:
        parts.append("".join(current))
    joined = _nfkc("".join(part[0].upper() + part[1:] for part in parts))
    # Case mapping can (rarely) yield a character outside XID_Continue; drop it rather
    # than emit a class name CPython refuses.
    joined = "".join(char for char in joined if _is_xid_continue(char))
    if not (joined and _is_xid_start(joined[0])):
        joined = "Tool" + joined
    return _nfkc(joined)


def _cap(base: str) -> str:
    return base[:MAX_CLASS_NAME_BASE]


def child_class_name(parent: str, segment: str) -> str:
    """A nested class-name base: parent name plus segment, normalised and capped."""
    # Normalise the join: a Hangul jamo segment can compose with the parent's last
    # syllable, and the emitted name must equal the compiled one.
    return _cap(_nfkc(parent + segment))


@dataclass(slots=True)
class ClassNames:
    """Allocates unique class names for one render (collisions get ``2``, ``3``, ...)."""

    used: set[str] = field(default_factory=set)
    # Next suffix per capped base, so a long chain sharing one base stays linear.
    next_suffix: dict[str, int] = field(default_factory=dict)

    def allocate(self, base: str) -> str:
        """Reserve and return a unique name derived from ``base``."""
        capped = _cap(base)
        name = capped
        if name in self.used:
            suffix = self.next_suffix.get(capped, 2)
            while f"{capped}{suffix}" in self.used:
                suffix += 1
            name = f"{capped}{suffix}"
            self.next_suffix[capped] = suffix + 1
        self.used.add(name)
        return name

    def copy(self) -> ClassNames:
        """An independent snapshot (used to roll back a failed render)."""
        return ClassNames(set(self.used), dict(self.next_suffix))


def describe(description: object) -> str | None:
    """A description folded to one line with control characters made visible.

    ``None`` when there is nothing to say. Controls become ``\\xNN`` and lone surrogates
    ``\\uNNNN``: literal text in a comment, and escapes the docstring path keeps literal
    by doubling the backslash.
    """
    if not isinstance(description, str):
        return None
    text = _UNPRINTABLE_OR_SURROGATE.sub(_visible, collapse_whitespace(description))
    return text or None


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\u{code:04x}" if code >= 0xD800 else f"\\x{code:02x}"


def docstring(description: object, indent: str) -> list[str]:
    """A one-line method docstring, or nothing when there is no description."""
    text = describe(description)
    if text is None:
        return []
    # Backslashes first, then quotes: a trailing `"` or odd backslash could otherwise
    # merge with or escape the closing triple quote.
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return [f'{indent}"""{escaped}"""']
