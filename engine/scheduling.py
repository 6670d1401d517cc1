"""Native scheduling: run one model step's sibling tool calls (barriers + rolling pool)."""

from __future__ import annotations

from ._scheduling import ModelToolCall as ModelToolCall
from ._scheduling import parse_arguments as parse_arguments
from ._scheduling import run_tool_calls as run_tool_calls

__all__ = ["ModelToolCall", "parse_arguments", "run_tool_calls"]
