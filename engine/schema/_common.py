"""Vocabulary shared by the schema DSL, the subset checker and the validator.

Paths are linked lists (``(parent, segment)``) rendered only when a violation is
reported: building a full path string per node would cost O(depth²) on the 5,000-deep
schemas and values the suite exercises.
"""

from __future__ import annotations

import math
from typing import Any, TypeAlias

from ..json import FrozenDict, FrozenList, LosslessJsonError, dumps_compact, is_lossless, snapshot

__all__ = [
    "ANNOTATIONS",
    "At",
    "JSON_DICTS",
    "JSON_LISTS",
    "SCALAR_TYPES",
    "SUBSET_KEYWORDS",
    "TYPES",
    "Path",
    "check_annotations",
    "check_scalar_keywords",
    "check_type_value",
    "index_path",
    "is_json_dict",
    "is_json_list",
    "json_scalar_equal",
    "key_path",
    "number_problem",
    "render_path",
    "type_noun",
]

SCALAR_TYPES = ("string", "number", "integer", "boolean", "null")
TYPES = (*SCALAR_TYPES, "array", "object")
ANNOTATIONS = ("description", "title", "default", "examples")
SUBSET_KEYWORDS = frozenset(
    {"type", "oneOf", "properties", "required", "additionalProperties", "items", "enum", "const"}
    | set(ANNOTATIONS)
)

# The exact container types snapshot() accepts; subclasses (OrderedDict, ...) are lossy.
JSON_DICTS = (dict, FrozenDict)
JSON_LISTS = (list, FrozenList)

# A path is None (the root) or (parent, segment); a segment is a key (str) or index (int).
Path: TypeAlias = "tuple[Path, str | int] | None"


def key_path(parent: Path, key: str) -> Path:
    """The path of ``key`` inside the object at ``parent``."""
    return (parent, key)


def index_path(parent: Path, index: int) -> Path:
    """The path of item ``index`` inside the array at ``parent``."""
    return (parent, index)


def render_path(path: Path, prefix: str) -> str:
    """``prefix`` followed by ``.key`` / ``[i]`` segments; a key at an empty prefix is bare."""
    segments: list[str | int] = []
    while path is not None:
        path, segment = path
        segments.append(segment)
    text = prefix
    for segment in reversed(segments):
        if isinstance(segment, int):
            text = f"{text}[{segment}]"
        else:
            text = f"{text}.{segment}" if text else segment
    return text


class At:
    """A schema location rendered only when formatted into a violation message."""

    __slots__ = ("path", "prefix")

    def __init__(self, path: Path, prefix: str) -> None:
        self.path = path
        self.prefix = prefix

    def __str__(self) -> str:
        return render_path(self.path, self.prefix)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def key(self, key: str) -> At:
        """The location of ``key`` inside this one."""
        return At(key_path(self.path, key), self.prefix)

    def index(self, index: int) -> At:
        """The location of item ``index`` inside this one."""
        return At(index_path(self.path, index), self.prefix)


def is_json_dict(value: Any) -> bool:
    """True for the dict types a lossless JSON object may have."""
    return type(value) in JSON_DICTS


def is_json_list(value: Any) -> bool:
    """True for the list types a lossless JSON array may have."""
    return type(value) in JSON_LISTS


def number_problem(value: int | float) -> str | None:
    """Why a (non-bool) number is not lossless JSON, phrased for ``"x" must be ...``."""
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return "must be a finite JSON number"
        if value == 0.0 and math.copysign(1.0, value) < 0:
            return "must be a lossless JSON value"
        return None
    try:
        float(value)
    except OverflowError:
        # Python ints are unbounded; one past float range has no JSON-number reading.
        return "must be a finite JSON number"
    return None


def json_scalar_equal(a: Any, b: Any) -> bool:
    """JSON equality for scalars: ``True`` is not ``1`` and ``1 == 1.0`` (one number type)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return False


_TYPE_NOUNS = {
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "a boolean",
    "null": "null",
}


def _scalar_matches(value: Any, type_name: str | None) -> bool:
    if type_name is None:
        return value is None or isinstance(value, (str, bool, int, float))
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "boolean":
        return isinstance(value, bool)
    if type_name == "null":
        return value is None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if type_name == "integer":
        return isinstance(value, int) or value.is_integer()
    return type_name == "number"


def _scalar_keyword_value_problem(value: Any, type_name: str | None, where: At) -> str | None:
    """Why one ``enum`` element or ``const`` value is unusable, or None."""
    lossy = _lossless_problem(value, where)
    if lossy is not None:
        return lossy
    if type_name is None:
        if not _scalar_matches(value, None):
            return (
                f"{where}: {dumps_compact(value)} is not a scalar (string, number, boolean or null)"
            )
        return None
    if not _scalar_matches(value, type_name):
        return f"{where}: {dumps_compact(value)} does not match type {dumps_compact(type_name)}"
    return None


def _lossless_problem(value: Any, where: At) -> str | None:
    # Check first, render the path only for the message: paths cost O(depth) to build.
    if is_lossless(value):
        return None
    try:
        snapshot(value, freeze=False, label=str(where))
    except LosslessJsonError as exc:
        return str(exc)
    return None  # pragma: no cover - is_lossless and snapshot agree


def check_scalar_keywords(
    node: dict[str, Any], type_name: str | None, at: At, out: list[str]
) -> None:
    """Check ``enum``/``const`` of a node whose (valid or absent) type is ``type_name``.

    The caller reports ``enum``/``const`` on object/array types as misplaced, so here
    ``type_name`` is a scalar type or None (any scalar).
    """
    enum: list[Any] = []
    enum_ok = False
    if "enum" in node:
        where = at.key("enum")
        if not is_json_list(node["enum"]) or not node["enum"]:
            out.append(f"{where}: must be a non-empty array")
        else:
            enum = node["enum"]
            problems = [
                _scalar_keyword_value_problem(item, type_name, where.index(i))
                for i, item in enumerate(enum)
            ]
            out.extend(p for p in problems if p is not None)
            enum_ok = all(p is None for p in problems)
    if "const" in node:
        where = at.key("const")
        problem = _scalar_keyword_value_problem(node["const"], type_name, where)
        if problem is not None:
            out.append(problem)
        elif enum_ok and not any(json_scalar_equal(node["const"], item) for item in enum):
            out.append(f'{where}: {dumps_compact(node["const"])} is not one of the "enum" values')


def check_type_value(value: Any, types: tuple[str, ...], at: At, out: list[str]) -> str | None:
    """The type name when ``value``, the ``type`` keyword of the node at ``at``, is one of
    ``types``; otherwise report why it is unusable and return None."""
    if isinstance(value, str) and value in types:
        return value
    where = at.key("type")
    if isinstance(value, (list, tuple)):
        out.append(f"{where}: type arrays are not supported; use oneOf")
    elif isinstance(value, str):
        out.append(f'{where}: unsupported type "{value}"')
    else:
        out.append(f"{where}: must be a string")
    return None


def check_annotations(node: dict[str, Any], at: At, out: list[str]) -> None:
    """``description``/``title`` must be strings; ``default``/``examples`` lossless JSON."""
    for name in ("description", "title"):
        if name in node and not isinstance(node[name], str):
            out.append(f"{at.key(name)}: must be a string")
    for name in ("default", "examples"):
        if name in node:
            problem = _lossless_problem(node[name], at.key(name))
            if problem is not None:
                out.append(problem)


def type_noun(type_name: str) -> str:
    """``a string`` / ``an integer`` / ``null`` ... for ``"x" must be <noun>``."""
    return _TYPE_NOUNS.get(type_name) or ("an object" if type_name == "object" else "an array")
