"""``codemode tools``: the built-in catalog as a table for people or JSON for hosts.

Parallel-safety is read from each tool's own classifier (through
``ToolRuntime.execution_mode``, the same decision the scheduler makes), probed with a
minimal valid argument object and then with every value of each enumerable top-level
parameter: a tool such as ``str_replace_editor`` is parallel-safe only for
``command: "view"``, and says so.
"""

from __future__ import annotations

import textwrap
from typing import Any

from codemode.engine import AbortController, Scope, ToolExecutionInput, ToolRuntime
from codemode.engine.json import thaw

__all__ = ["catalog_entries", "render_table"]

_RUN_CODE = "run_code"


def _enumerable(prop: Any) -> list[Any]:
    """The finite set of values a parameter schema allows, or ``[]`` when open-ended."""
    if not isinstance(prop, dict):
        return []
    if isinstance(prop.get("enum"), list):
        return list(prop["enum"])
    if prop.get("type") == "boolean":
        return [True, False]
    return []


def _sample(schema: Any, depth: int = 0) -> Any:
    """A small value valid for ``schema`` (best effort): classifiers see only valid
    arguments (``define_tool`` answers ``False`` for invalid ones), so probes must be."""
    if not isinstance(schema, dict) or depth > 20:
        return None
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("oneOf", "anyOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return _sample(schema[key][0], depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0] if kind else None
    if kind == "string":
        return "x" * max(1, int(schema.get("minLength", 1)))
    if kind in ("integer", "number"):
        return max(1, int(schema.get("minimum", 1)))
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    if kind == "array":
        return [_sample(schema.get("items"), depth + 1)] * int(schema.get("minItems", 0))
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        required = schema.get("required") or []
        return {k: _sample(properties.get(k), depth + 1) for k in required}
    return None


def _parallel_safety(
    runtime: ToolRuntime, scope: Scope, name: str, parameters: Any
) -> tuple[str, dict[str, list[Any]]]:
    """``("always" | "never" | "conditional", {param: [safe values]})``."""
    signal = AbortController().signal

    def parallel(arguments: Any) -> bool:
        probe = ToolExecutionInput(
            call_id="codemode-tools-probe",
            name=name,
            arguments=arguments,
            signal=signal,
            agent=scope,
        )
        return runtime.execution_mode(probe) == "parallel"

    base = _sample(parameters)
    base = base if isinstance(base, dict) else {}
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    when: dict[str, list[Any]] = {}
    for key, prop in (properties or {}).items():
        values = _enumerable(prop)
        if len(values) < 2:
            continue
        safe = [value for value in values if parallel({**base, key: value})]
        if safe and len(safe) < len(values):
            when[key] = safe
    if when:
        return "conditional", when
    return ("always", {}) if parallel(base) else ("never", {})


#: Where a tool is offered: ``always`` (``codemode run``, ``codemode agent`` and
#: ``serve-mcp --builtin-tools``), ``agent`` (only ``codemode agent``, which drives the
#: agent the tool acts on), ``images`` (only with ``--images``: the model takes images).
Offered = str


def catalog_entries(
    runtime: ToolRuntime, scope: Scope, offered: dict[str, Offered] | None = None
) -> list[dict[str, Any]]:
    """One JSON object per tool the scope sees, ``run_code`` excluded, sorted by name.

    ``name``, ``description`` and ``parameters`` are exactly the native wire schema;
    ``outputSchema`` is the value schema the SDK documents; ``parallelSafe`` is
    ``"always"``, ``"never"`` or ``"conditional"``, with ``parallelSafeWhen`` mapping a
    parameter to the values for which the call may overlap its siblings; ``offered``
    (``always``, ``agent`` or ``images``, from ``offered``; default ``always``) says where
    the tool is offered.
    """
    entries = []
    for schema in sorted(runtime.schemas(scope), key=lambda s: s.name):
        if schema.name == _RUN_CODE:
            continue
        definition = runtime.get(schema.name, scope)
        parameters = thaw(schema.parameters)
        safety, when = _parallel_safety(runtime, scope, schema.name, parameters)
        entry: dict[str, Any] = {
            "name": schema.name,
            "description": schema.description,
            "parameters": parameters,
            "outputSchema": thaw(definition.output.schema) if definition is not None else None,
            "parallelSafe": safety,
            "offered": (offered or {}).get(schema.name, "always"),
        }
        if when:
            entry["parallelSafeWhen"] = when
        entries.append(entry)
    return entries


def _scheduling_label(entry: dict[str, Any]) -> str:
    safety = entry["parallelSafe"]
    if safety == "always":
        return "parallel-safe"
    if safety == "never":
        return "exclusive"
    conditions = [
        f"{key}={'|'.join(str(v) for v in values)}"
        for key, values in entry["parallelSafeWhen"].items()
    ]
    return "parallel-safe for " + ", ".join(conditions)


def _summary(description: str) -> str:
    """The description's first paragraph, as one line of words."""
    paragraph = description.strip().split("\n\n", 1)[0]
    return " ".join(paragraph.split())


_SECTIONS = (
    ("always", "Offered by codemode run and codemode agent:"),
    ("images", "With --images (the model takes images):"),
    ("agent", "Only under codemode agent (they act on the agent that calls them):"),
)


def render_table(entries: list[dict[str, Any]], width: int) -> str:
    """Name, scheduling and the first paragraph of the description, wrapped at word
    boundaries to ``width`` columns (never cut: a word longer than the column overflows),
    in one section per place the tools are offered (``offered``)."""
    rows = [
        (e.get("offered", "always"), e["name"], _scheduling_label(e), _summary(e["description"]))
        for e in entries
    ]
    headers = ("tool", "scheduling", "description")
    name_w = max(len(headers[0]), *(len(r[1]) for r in rows)) if rows else len(headers[0])
    mode_w = max(len(headers[1]), *(len(r[2]) for r in rows)) if rows else len(headers[1])
    indent = name_w + mode_w + 4
    # Below ~20 columns of description, wrapping turns into one word per line; overflow
    # the terminal instead.
    text_w = max(width - indent, 20)
    lines = [f"{headers[0]:<{name_w}}  {headers[1]:<{mode_w}}  {headers[2]}"]
    for key, title in _SECTIONS:
        section = [r for r in rows if r[0] == key]
        if not section:
            continue
        lines.extend(["", title])
        for _key, name, mode, summary in section:
            wrapped = textwrap.wrap(summary, text_w, break_long_words=False, break_on_hyphens=False)
            first, *rest = wrapped or [""]
            lines.append(f"{name:<{name_w}}  {mode:<{mode_w}}  {first}".rstrip())
            lines.extend(" " * indent + line for line in rest)
    return "\n".join(lines)
