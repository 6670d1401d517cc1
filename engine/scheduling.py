"""Native scheduling: run one model step's sibling tool calls (barriers + rolling pool)."""

from __future__ import annotations

from ._arguments import UnparsedArguments as UnparsedArguments
from ._arguments import invalid_json_message as invalid_json_message
from ._scheduling import ModelToolCall as ModelToolCall
from ._scheduling import parse_arguments as parse_arguments
from ._scheduling import run_tool_calls as run_tool_calls

__all__ = [
    "ModelToolCall",
    "UnparsedArguments",
    "invalid_json_message",
    "parse_arguments",
    "run_tool_calls",
]
