"""Hypothesis strategies shared by the sdk_gen tests.

Named ``sdk_gen_strategies`` (not ``strategies``) because test directories are not
packages here, so module basenames must be unique across the whole test tree.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from codemode.sdk_gen import SdkTool

# Text that exercises every escaping rule: quotes, backslashes, comment closers, every
# kind of control and whitespace character, non-BMP characters and lone surrogates.
_TRICKY = st.sampled_from(
    [
        '"',
        "\\",
        "*/",
        '"""',
        "#",
        "\x00",
        "\x07",
        "\x1f",
        "\x7f",
        "\x85",
        "\u2028",
        "\ufeff",
        "\t",
        "\n",
        "\r",
        " ",
        "\ud800",
        "\udfff",
        "😀",
        "ﬁ",
        "é",
        "路径",
        "-",
        "_",
        "$",
        "1",
    ]
)
tricky_text = st.lists(st.one_of(_TRICKY, st.text(max_size=4)), max_size=6).map("".join)

names = st.one_of(
    st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True),
    st.sampled_from(["class", "match", "_private", "__proto__", "__debug__", "my-tool", "ﬁle"]),
    tricky_text,
)

_SCALAR_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "string": tricky_text,
    "number": st.one_of(
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False).filter(
            lambda f: f != 0 or str(f) == "0.0"
        ),
    ),
    "integer": st.integers(-(2**70), 2**70),
    "boolean": st.booleans(),
}


@st.composite
def _scalar_schema(draw: st.DrawFn) -> dict[str, Any]:
    schema_type = draw(st.sampled_from(["string", "number", "integer", "boolean", "null"]))
    node: dict[str, Any] = {"type": schema_type}
    if schema_type != "null":
        values = _SCALAR_VALUES[schema_type]
        if draw(st.booleans()):
            node["enum"] = draw(st.lists(values, min_size=1, max_size=4))
            if draw(st.booleans()):
                node["const"] = draw(st.sampled_from(node["enum"]))
        elif draw(st.booleans()):
            node["const"] = draw(values)
    return node


def _with_description(
    node_strategy: st.SearchStrategy[dict[str, Any]],
) -> st.SearchStrategy[dict[str, Any]]:
    return st.tuples(node_strategy, st.none() | tricky_text).map(
        lambda pair: pair[0] if pair[1] is None else {**pair[0], "description": pair[1]}
    )


def _extend(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    arrays = st.one_of(
        st.just({"type": "array"}),
        children.map(lambda item: {"type": "array", "items": item}),
    )
    unions = st.lists(children, min_size=2, max_size=3).map(lambda branches: {"oneOf": branches})

    @st.composite
    def objects(draw: st.DrawFn) -> dict[str, Any]:
        properties = draw(st.dictionaries(names, children, max_size=4))
        node: dict[str, Any] = {"type": "object", "properties": properties}
        wants_required = draw(st.booleans())
        if properties and wants_required:
            node["required"] = draw(st.lists(st.sampled_from(sorted(properties)), unique=True))
        openness = draw(st.sampled_from([None, True, False]))
        if openness is not None:
            node["additionalProperties"] = openness
        return node

    return _with_description(st.one_of(arrays, unions, objects()))


valid_schemas: st.SearchStrategy[dict[str, Any]] = st.recursive(
    _with_description(st.one_of(_scalar_schema(), st.just({}))), _extend, max_leaves=12
)
"""Schemas inside the enforced subset (with hostile names, values and descriptions)."""

json_values: st.SearchStrategy[Any] = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        tricky_text,
        st.sampled_from(["object", "array", "string", "oneOf", "type", "items", "enum"]),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "oneOf",
                    "properties",
                    "required",
                    "additionalProperties",
                    "items",
                    "enum",
                    "const",
                    "description",
                    "title",
                    "default",
                    "minimum",
                ]
            )
            | tricky_text,
            children,
            max_size=5,
        ),
    ),
    max_leaves=15,
)
"""Arbitrary JSON-like data, biased towards schema keywords: mostly malformed schemas."""

any_schema = st.one_of(valid_schemas, json_values)


@st.composite
def tool_sets(draw: st.DrawFn, schemas: st.SearchStrategy[Any] = any_schema) -> list[SdkTool]:
    """Tools with unique names and arbitrary (often malformed) schemas."""
    tool_names = draw(st.lists(names, unique=True, max_size=6))
    return [
        SdkTool(
            name=name,
            description=draw(tricky_text),
            parameters=draw(schemas),
            output_schema=draw(schemas),
        )
        for name in tool_names
    ]
