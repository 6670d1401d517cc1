"""Value validation against a supported schema (``validate_json_schema_value``).

Total: any Python value is accepted and every violation is returned, path-qualified
(``"value.tags[1]" must be a string``). One violation per node at most: a type mismatch
hides that node's ``enum``/``const`` and children. The walk is iterative (an explicit
work stack), so 5,000-deep values and 5,000-deep nested ``oneOf`` stay off the Python
stack, and a value cycle is reported instead of looping.

Python specifics (where Python values differ from JSON's): ``bool`` is never a number or an integer; an
integral float (``1.0``) is an integer, as in JSON; NaN/±inf are not finite JSON
numbers; ``-0.0``, tuples-as-values, non-``str`` keys, dict/list subclasses and other
objects are not lossless JSON values. Only an absent key is missing (``None`` is null).

Speed: each schema is compiled once (``_compile``) into a yes/no validator that
builds no paths and no messages, cached per schema. A valid value costs only that fast
check; this walker runs only when the fast check says invalid (or leaves the value to it:
deep or cyclic values), so the messages are the walker's, byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

from ..json import dumps_compact
from ._common import (
    Path,
    index_path,
    is_json_dict,
    is_json_list,
    json_scalar_equal,
    key_path,
    number_problem,
    render_path,
    type_noun,
)
from ._compile import Undecided, validator_for

__all__ = ["validate_args", "validate_json_schema_value"]

_ANY: dict[str, Any] = {}
_NOT_LOSSLESS = "must be a lossless JSON value"

# Work items on the stack:
#   ("visit", schema, value, path, sink, depth)   validate one node, appending to sink
#   ("note", message, sink)                append a message (keeps document order)
#   ("leave", id)                          the container left the ancestor set
#   ("oneOf", branch_sinks, path, sink)    count the branches that matched
_Task: TypeAlias = tuple[Any, ...]


def _type_problem(type_name: str, value: Any) -> str | None:
    """Why ``value`` does not have JSON type ``type_name`` (or a lossy number), or None."""
    if type_name == "string":
        ok = isinstance(value, str)
    elif type_name == "boolean":
        ok = isinstance(value, bool)
    elif type_name == "null":
        ok = value is None
    elif type_name in ("number", "integer"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"must be {type_noun(type_name)}"
        lossy = number_problem(value)
        if lossy is not None:
            return lossy
        ok = type_name == "number" or isinstance(value, int) or value.is_integer()
    elif type_name == "object":
        if isinstance(value, dict) and not is_json_dict(value):
            return _NOT_LOSSLESS
        ok = is_json_dict(value)
    elif type_name == "array":
        if isinstance(value, list) and not is_json_list(value):
            return _NOT_LOSSLESS
        ok = is_json_list(value)
    else:
        # Unreachable for asserted schemas; an unknown type accepts nothing.
        ok = False
    return None if ok else f"must be {type_noun(type_name)}"


def _untyped_problem(value: Any) -> str | None:
    """Why ``value`` is not a lossless JSON node (children are checked separately)."""
    if value is None or isinstance(value, (str, bool)):
        return None
    if isinstance(value, (int, float)):
        return number_problem(value)
    if is_json_dict(value) or is_json_list(value):
        return None
    return _NOT_LOSSLESS


class _Cycle(Exception):
    """The sparse ancestor check met a cycle; the exact pass reports where it starts."""


# Ancestors are remembered only every ``_SPARSE`` levels on the first pass (as in
# ``_json``): a cycle is still met, within _SPARSE + its length, and the ancestor set stays
# small next to the work stack (a set grows fourfold at a time). Meeting one reruns with
# every ancestor remembered, so the messages are exactly those of an exact walk.
_SPARSE = 16


def _run(schema: Any, value: Any, prefix: str, root_label: str) -> list[str]:
    try:
        return _walk(schema, value, prefix, root_label, _SPARSE)
    except _Cycle:
        return _walk(schema, value, prefix, root_label, 1)


def _walk(schema: Any, value: Any, prefix: str, root_label: str, every: int) -> list[str]:
    def show(path: Path) -> str:
        return render_path(path, prefix) or root_label

    out: list[str] = []
    active: set[int] = set()
    stack: list[_Task] = [("visit", schema, value, None, out, 0)]
    while stack:
        task = stack.pop()
        kind = task[0]
        if kind == "note":
            task[2].append(task[1])
            continue
        if kind == "leave":
            active.discard(task[1])
            continue
        if kind == "oneOf":
            _, branch_sinks, path, sink = task
            matched = sum(1 for s in branch_sinks if not s)
            if matched != 1:
                sink.append(
                    f'"{show(path)}" must match exactly one oneOf branch (matched {matched})'
                )
            continue

        _, node, val, path, sink, depth = task
        if not isinstance(node, dict):
            node = _ANY
        if "oneOf" in node:
            branches = node["oneOf"]
            sinks: list[list[str]] = [[] for _ in branches]
            stack.append(("oneOf", sinks, path, sink))
            for branch, branch_sink in reversed(list(zip(branches, sinks, strict=True))):
                stack.append(("visit", branch, val, path, branch_sink, depth))
            continue

        type_name = node.get("type")
        if isinstance(type_name, str):
            problem = _type_problem(type_name, val)
        else:
            problem = _untyped_problem(val)
        if problem is not None:
            sink.append(f'"{show(path)}" {problem}')
            continue

        if "enum" in node and not any(json_scalar_equal(val, e) for e in node["enum"]):
            sink.append(f'"{show(path)}" must be one of {dumps_compact(node["enum"])}')
            continue
        if "const" in node and not json_scalar_equal(val, node["const"]):
            sink.append(f'"{show(path)}" must be {dumps_compact(node["const"])}')
            continue

        if is_json_dict(val) or is_json_list(val):
            if node is _ANY and getattr(val, "_sealed", False) is True:
                continue  # a sealed snapshot is known lossless: nothing below can fail
            if id(val) in active and every > 1:
                raise _Cycle
            if id(val) in active or (
                is_json_dict(val) and not all(isinstance(k, str) for k in val)
            ):
                sink.append(f'"{show(path)}" {_NOT_LOSSLESS}')
                continue
            if depth % every == 0:
                active.add(id(val))
                stack.append(("leave", id(val)))
            child_depth = depth + 1
            children = (
                _object_tasks(node, val, path, sink, show, child_depth)
                if is_json_dict(val)
                else [
                    ("visit", node.get("items", _ANY), item, index_path(path, i), sink, child_depth)
                    for i, item in enumerate(val)
                ]
            )
            stack.extend(reversed(children))
    return out


def _object_tasks(
    node: dict[str, Any],
    val: dict[str, Any],
    path: Path,
    sink: list[str],
    show: Callable[[Path], str],
    depth: int,
) -> list[_Task]:
    """Tasks for one object, in report order: missing required names, then each key."""
    tasks: list[_Task] = []
    properties = node.get("properties") or _ANY
    for name in node.get("required") or ():
        if name not in val:
            tasks.append(
                ("note", f'missing required property "{show(key_path(path, name))}"', sink)
            )
    closed = node.get("additionalProperties") is False
    for key, child in val.items():
        sub = properties.get(key)
        child_path = key_path(path, key)
        if sub is not None:
            tasks.append(("visit", sub, child, child_path, sink, depth))
        elif closed:
            message = (
                f'"{show(child_path)}" is not a declared property (additionalProperties: false)'
            )
            tasks.append(("note", message, sink))
        else:
            tasks.append(("visit", _ANY, child, child_path, sink, depth))
    return tasks


def _valid(schema: Any, value: Any) -> bool:
    """The compiled fast path: True only when the walker would report nothing."""
    try:
        return validator_for(schema)(value)
    except (Undecided, RecursionError):
        return False


def compiled_validator(schema: Any) -> Callable[[Any], bool]:
    """``schema``'s yes/no validator, compiled now, for a caller that keeps it (a tool's
    parameters): True only when ``validate_json_schema_value`` would report nothing; a
    value it will not decide (very deep) is False, for the walker to look at."""
    check = validator_for(schema)

    def valid(value: Any) -> bool:
        try:
            return check(value)
        except (Undecided, RecursionError):
            return False

    return valid


def validate_json_schema_value(schema: Any, value: Any, path: str = "value") -> list[str]:
    """Every violation of ``value`` against a supported ``schema``; ``[]`` when valid.

    Paths start at ``path`` and join keys with ``.`` and indices with ``[i]``:
    ``"value.tags[1]" must be a string``, ``missing required property "value.a.b"``.
    The schema should have passed ``assert_supported_json_schema``.
    """
    if _valid(schema, value):
        return []
    return _run(schema, value, path, path or "value")


def validate_args(parameters_schema: Any, args: Any) -> list[str]:
    """Validate tool arguments against a parameters schema.

    ``parameters_schema`` is either the compiled (raw) object schema or the DSL
    parameter map ``{prop: spec}`` that ``define_tool`` takes (either form is
    accepted, so callers need not compile a DSL map first). A raw parameters schema has a string
    ``"type": "object"``; a non-empty plain dict without one whose every value is a spec
    and that compiles as a DSL map is treated as one; anything else is validated as a
    raw schema.

    Paths start empty, so nested keys appear bare (``"x" must be a number``,
    ``missing required property "description"``) and only a root problem is labelled
    ``arguments`` (``"arguments" must be an object``).
    """
    if (
        type(parameters_schema) is dict
        and parameters_schema
        and not isinstance(parameters_schema.get("type"), str)
    ):
        parameters_schema = _dsl_or_raw(parameters_schema)
    if _valid(parameters_schema, args):
        return []
    return _run(parameters_schema, args, "", "arguments")


def _dsl_or_raw(schema: dict[str, Any]) -> Any:
    from .._errors import JsonSchemaError
    from ._dsl import parameter_schema_spec_to_json_schema

    # Only a map whose every value is a spec (a dict with a "type" string or a "oneOf"
    # list) can be a DSL map; raw keywords ("enum": [...], "properties": {...}) fail this
    # or the compile below and stay raw.
    for spec in schema.values():
        if not isinstance(spec, dict) or not (
            isinstance(spec.get("type"), str) or isinstance(spec.get("oneOf"), list)
        ):
            return schema
    try:
        return parameter_schema_spec_to_json_schema(schema)
    except JsonSchemaError:
        return schema
