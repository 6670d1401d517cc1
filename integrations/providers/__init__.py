"""Provider adapters: the runtime's tool schemas in OpenAI and Anthropic formats, and the
providers' tool-call messages back to ``ModelToolCall`` / ``ToolExecutionInput``.

Pure functions, no SDK import: they take ``rt.schemas(scope)`` and the provider's
messages as plain dicts or as the SDKs' pydantic objects (anything with
``model_dump()``), and return plain dicts the SDKs accept.

One model step, for each provider::

    tools = openai_chat_tools(rt.schemas(agent), strict=True)       # request
    calls = openai_chat_calls(completion, strict_schemas=rt.schemas(agent))
    results = await run_tool_calls(rt, calls, agent=agent, signal=signal)
    messages += openai_chat_results(calls, results)                  # next request

Responses: ``openai_responses_tools`` / ``openai_responses_calls`` /
``openai_responses_results``. Anthropic: ``anthropic_tools`` / ``anthropic_calls`` /
``anthropic_results`` (blocks for one user message). ``execution_inputs`` turns calls
into ``ToolExecutionInput``s for ``rt.execute`` when a host schedules calls itself.
"""

from __future__ import annotations

from ._anthropic import anthropic_calls as anthropic_calls
from ._anthropic import anthropic_results as anthropic_results
from ._anthropic import anthropic_tools as anthropic_tools
from ._common import content_text as content_text
from ._common import execution_inputs as execution_inputs
from ._openai import openai_chat_calls as openai_chat_calls
from ._openai import openai_chat_results as openai_chat_results
from ._openai import openai_chat_tools as openai_chat_tools
from ._openai import openai_responses_calls as openai_responses_calls
from ._openai import openai_responses_results as openai_responses_results
from ._openai import openai_responses_tools as openai_responses_tools
from ._strict import STRICT_LIMITS as STRICT_LIMITS
from ._strict import accepts_null as accepts_null
from ._strict import strict_parameters as strict_parameters
from ._strict import strip_strict_nulls as strip_strict_nulls

__all__ = [
    "STRICT_LIMITS",
    "accepts_null",
    "anthropic_calls",
    "anthropic_results",
    "anthropic_tools",
    "content_text",
    "execution_inputs",
    "openai_chat_calls",
    "openai_chat_results",
    "openai_chat_tools",
    "openai_responses_calls",
    "openai_responses_results",
    "openai_responses_tools",
    "strict_parameters",
    "strip_strict_nulls",
]
