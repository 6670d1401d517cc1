"""The catalog entries this package implements, shipped as package data (``_catalog.json``).

``_catalog.json`` is a verbatim copy of the shared tool catalog's entries (names, model-facing
descriptions, input JSON schemas); a test keeps it equal to the shared spec. Each tool's
``define_tool`` parameter spec is derived from the raw schema here, so the compiled
``parameters`` reproduce the catalog byte for byte (key order included).
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

from codemode.engine import ToolDefinition, define_tool

__all__ = ["catalog_entry", "define_catalog_tool", "parameter_spec"]


@cache
def _all_entries() -> dict[tuple[str, str], dict[str, Any]]:
    # Next to this module (package data); a plain path works for wheels and editable installs.
    raw = Path(__file__).with_name("_catalog.json").read_text(encoding="utf-8")
    data = json.loads(raw)
    return {(entry["package"], entry["name"]): entry for entry in data["tools"]}


@cache
def _entries() -> dict[str, dict[str, Any]]:
    # One name may have variants in several packages (``bash``: one-shot and persistent);
    # the first listed is the default, the others are reached by package.
    by_name: dict[str, dict[str, Any]] = {}
    for entry in _all_entries().values():
        by_name.setdefault(entry["name"], entry)
    return by_name


def _entry(name: str, package: str | None) -> dict[str, Any]:
    if package is None:
        return _entries()[name]
    return _all_entries()[(package, name)]


def catalog_entry(name: str, package: str | None = None) -> dict[str, Any]:
    """A fresh copy of ``{package, name, description, parameters}`` for tool ``name``.

    ``package`` picks a variant where several catalog packages define the same name
    (``"@deepseek-ai/dsh-tool-bash-persistent"`` for the persistent ``bash``).
    """
    return copy.deepcopy(_entry(name, package))


def _to_spec(schema: dict[str, Any]) -> dict[str, Any]:
    # Raw object schemas list required properties; the DSL marks each property instead.
    required = set(schema.get("required", ()))
    spec: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "required":
            continue
        if key == "properties":
            props: dict[str, Any] = {}
            for prop, prop_schema in value.items():
                prop_spec = _to_spec(prop_schema)
                if prop in required:
                    prop_spec["required"] = True
                props[prop] = prop_spec
            spec[key] = props
        elif key == "items":
            spec[key] = _to_spec(value)
        elif key == "oneOf" and isinstance(value, list):
            # Branches are schemas too (``schedule_create.at``: a string or an object).
            spec[key] = [_to_spec(branch) for branch in value]
        else:
            spec[key] = copy.deepcopy(value)
    return spec


def parameter_spec(name: str, package: str | None = None) -> dict[str, Any]:
    """The DSL ``parameters`` map whose compilation is the catalog schema of ``name``."""
    root = _to_spec(_entry(name, package)["parameters"])
    props: dict[str, Any] = root.get("properties", {})
    return props


def define_catalog_tool(
    name: str,
    *,
    package: str | None = None,
    description: str | None = None,
    parameters: dict[str, Any] | None = None,
    **options: Any,
) -> ToolDefinition:
    """``define_tool`` for catalog entry ``name`` (of ``package``, where it has variants): the
    entry's name, and its description and parameter spec unless overridden; ``options`` are
    the rest of ``define_tool``'s."""
    entry = _entry(name, package)
    return define_tool(
        name=entry["name"],
        description=entry["description"] if description is None else description,
        parameters=parameter_spec(name, package) if parameters is None else parameters,
        **options,
    )
