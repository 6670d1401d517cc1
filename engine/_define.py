"""``define_tool``: author a tool with the schema DSL and argument validation."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ._arguments import refuse_unparsed
from ._errors import ToolArgsError
from ._types import ToolDefinition, ToolOutput
from .json import FrozenDict, FrozenList
from .schema import (
    compiled_validator,
    parameter_schema_spec_to_json_schema,
    validate_args,
    value_schema_spec_to_json_schema,
)

__all__ = ["define_tool"]

_log = logging.getLogger("engine.define")

_FROZEN = (FrozenDict, FrozenList)


def define_tool(
    *,
    name: str,
    description: str,
    parameters: Mapping[str, Any],
    output: ToolOutput,
    execute: Callable[[Any, Any], Awaitable[Any]],
    is_concurrency_safe: Callable[[Any], Any] | None = None,
    timeout_ms: int | float | None = None,
    finalize_content: Callable[[Any, Any], Any] | None = None,
    present_call: Callable[[Any], Any] | None = None,
    present_result: Callable[[Any, Any], Any] | None = None,
) -> ToolDefinition:
    """Define a tool whose ``parameters`` and ``output.schema`` are written in the DSL.

    The parameters compile to a raw object schema (open root); the body runs only with
    arguments that validate (otherwise ``ToolArgsError``: ``invalid arguments: ...``, which
    counts as an invoked body). The concurrency classifier sees only valid arguments
    (invalid -> exclusive) and the presenters likewise (invalid -> no card).
    Raises ``JsonSchemaError`` for a malformed DSL schema.
    """
    if not isinstance(output, ToolOutput):
        raise TypeError(
            f'tool "{name}" must declare output {{ schema, render, presentationMeta? }}'
        )
    compiled_params = parameter_schema_spec_to_json_schema(parameters)
    compiled_output = value_schema_spec_to_json_schema(output.schema)

    # The last sealed arguments validated and their problems. A call's arguments are one
    # deep-frozen snapshot from classification to the body (``snapshot`` returns a sealed
    # value as is), so the classifier, the body and the presenters would otherwise
    # validate the same immutable value two to four times. A weak reference: the memo
    # must not keep a large argument alive.
    memo: list[Any] = [None, ()]
    # The compiled check of the parameters, looked up once here rather than on every
    # call (``validate_args`` -> ``validator_for``'s cache): valid arguments (nearly
    # every call) cost the check alone; anything else gets ``validate_args``' messages.
    try:
        valid: Callable[[Any], bool] | None = compiled_validator(compiled_params)
    except RecursionError:
        valid = None

    def violations(args: Any) -> list[str]:
        sealed = type(args) in _FROZEN and getattr(args, "_sealed", False) is True
        if sealed:
            ref = memo[0]
            if ref is not None and ref() is args:
                return list(memo[1])
        problems = [] if valid is not None and valid(args) else validate_args(compiled_params, args)
        if sealed:
            memo[0] = weakref.ref(args)
            memo[1] = tuple(problems)
        return problems

    async def validated_execute(args: Any, ctx: Any) -> Any:
        # A string ``parse_arguments`` kept: say it is not JSON and where, not only that
        # "arguments" must be an object.
        refuse_unparsed(args)
        problems = violations(args)
        if problems:
            raise ToolArgsError(f"invalid arguments: {'; '.join(problems)}", problems)
        return await execute(args, ctx)

    classifier = None
    if is_concurrency_safe is not None:
        inner_classifier = is_concurrency_safe

        def classifier(args: Any) -> Any:
            if violations(args):
                return False
            return inner_classifier(args)

    call_presenter = None
    if present_call is not None:
        inner_call = present_call

        def call_presenter(args: Any) -> Any:
            if violations(args):
                return None
            return inner_call(args)

    result_presenter = None
    if present_result is not None:
        inner_result = present_result

        def result_presenter(args: Any, result: Any) -> Any:
            if violations(args):
                return None
            return inner_result(args, result)

    validated_execute.__qualname__ = f"{name}.execute"
    return ToolDefinition(
        name=name,
        description=description,
        parameters=compiled_params,
        output=ToolOutput(
            schema=compiled_output,
            render=output.render,
            presentation_meta=output.presentation_meta,
        ),
        execute=validated_execute,
        is_concurrency_safe=classifier,
        timeout_ms=timeout_ms,
        finalize_content=finalize_content,
        present_call=call_presenter,
        present_result=result_presenter,
    )
