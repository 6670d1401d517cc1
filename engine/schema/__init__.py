"""Schemas: the author DSL, the enforced raw JSON Schema subset, and value validation.

One normalised representation: the DSL (``define_tool`` parameters and output schemas)
compiles to the raw subset, raw schemas (``ToolDefinition``, MCP) are checked against
the same subset at ``register``, and ``validate_json_schema_value`` enforces it.

Error shapes (tests assert the exact text):

- schema problems: ``JsonSchemaError("unsupported JSON schema: <v1>; <v2>", violations)``
  with each violation ``<schema path>: <problem>``, e.g.
  ``schema.properties.tags.type: type arrays are not supported; use oneOf``;
- value problems: ``"value.x" must be a string``, ``missing required property "value.a"``,
  ``"value.k" is not a declared property (additionalProperties: false)``,
  ``"value" must match exactly one oneOf branch (matched 2)``, ...

Validation compiles each schema once into a yes/no validator (``_compile``,
cached per schema: sealed ``snapshot`` schemas, as the DSL and ``assert_*`` return, by
identity; plain dicts by identity and content) and answers a valid value from it alone;
the message-producing walker runs only for invalid (or very deep) values.
"""

from __future__ import annotations

from ._dsl import parameter_schema_spec_to_json_schema as parameter_schema_spec_to_json_schema
from ._dsl import value_schema_spec_to_json_schema as value_schema_spec_to_json_schema
from ._subset import assert_object_json_schema as assert_object_json_schema
from ._subset import assert_supported_json_schema as assert_supported_json_schema
from ._validate import compiled_validator as compiled_validator
from ._validate import validate_args as validate_args
from ._validate import validate_json_schema_value as validate_json_schema_value

__all__ = [
    "assert_object_json_schema",
    "assert_supported_json_schema",
    "compiled_validator",
    "parameter_schema_spec_to_json_schema",
    "validate_args",
    "validate_json_schema_value",
    "value_schema_spec_to_json_schema",
]
