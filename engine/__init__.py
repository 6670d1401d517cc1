"""codemode's engine: the tool registry, the guarded pipeline, code mode and scheduling.

Layout: ``_runtime`` (``ToolRuntime``) wires ``_registry`` (layers, views, guards),
``_hooks`` (listeners) and ``_pipeline`` (the staged path of every call; its result
shapes live in ``_results``); ``_scope`` is the per-agent layer, ``_execution`` the
objects a call's policies and body see, ``_types`` the data structs, ``_define`` the
DSL tool builder, ``_scheduling`` the native scheduler of one model step's sibling
calls. Subpackages: ``code_mode`` (``run_code``, the ``CodeRuntime`` seam, the
sub-dispatch driver), ``policies`` (installable timeout and spill policies),
``schema`` (the DSL and JSON Schema subset), ``json`` (lossless JSON).

Glossary: ``ToolRuntime`` = registry + pipeline (the host's entry point); ``CodeRuntime``
= a sandbox that runs programs; the calling scope is always called ``agent`` (a
``Scope``); a ``SessionLog`` is the only "session" in engine.

Public names only; implementation lives in private modules.
"""

from __future__ import annotations

from ._define import define_tool as define_tool
from ._errors import AbortError as AbortError
from ._errors import BindingCallError as BindingCallError
from ._errors import CodeRunFailedError as CodeRunFailedError
from ._errors import HarnessError as HarnessError
from ._errors import JsonSchemaError as JsonSchemaError
from ._errors import ToolArgsError as ToolArgsError
from ._errors import ToolNotFoundError as ToolNotFoundError
from ._errors import ToolOutputError as ToolOutputError
from ._errors import ToolTimeoutError as ToolTimeoutError
from ._execution import ToolDispatchExecution as ToolDispatchExecution
from ._execution import ToolExecution as ToolExecution
from ._execution import ToolRunContext as ToolRunContext
from ._runtime import ToolRuntime as ToolRuntime
from ._scope import Scope as Scope
from ._session import MemorySessionLog as MemorySessionLog
from ._session import SessionLog as SessionLog
from ._session import SqliteSessionLog as SqliteSessionLog
from ._signals import AbortController as AbortController
from ._signals import AbortSignal as AbortSignal
from ._signals import reason_text as reason_text
from ._types import Accept as Accept
from ._types import Allow as Allow
from ._types import Ask as Ask
from ._types import Block as Block
from ._types import Deny as Deny
from ._types import ToolDefinition as ToolDefinition
from ._types import ToolErrorInfo as ToolErrorInfo
from ._types import ToolExecutionFailure as ToolExecutionFailure
from ._types import ToolExecutionInput as ToolExecutionInput
from ._types import ToolExecutionResult as ToolExecutionResult
from ._types import ToolExecutionSuccess as ToolExecutionSuccess
from ._types import ToolFailure as ToolFailure
from ._types import ToolOutput as ToolOutput
from ._types import ToolSchema as ToolSchema
from ._types import text as text
from .code_mode import ERROR_KINDS as ERROR_KINDS
from .code_mode import Binding as Binding
from .code_mode import CodeDispatchLog as CodeDispatchLog
from .code_mode import CodeRunError as CodeRunError
from .code_mode import CodeRunRequest as CodeRunRequest
from .code_mode import CodeRunResult as CodeRunResult
from .code_mode import CodeRuntime as CodeRuntime
from .code_mode import ErrorClass as ErrorClass
from .code_mode import ErrorKind as ErrorKind
from .code_mode import SettlingBinding as SettlingBinding

__all__ = [
    "AbortController",
    "AbortError",
    "AbortSignal",
    "Accept",
    "Allow",
    "Ask",
    "Binding",
    "BindingCallError",
    "Block",
    "CodeDispatchLog",
    "CodeRunError",
    "CodeRunFailedError",
    "CodeRunRequest",
    "CodeRunResult",
    "CodeRuntime",
    "Deny",
    "ERROR_KINDS",
    "ErrorClass",
    "ErrorKind",
    "HarnessError",
    "JsonSchemaError",
    "MemorySessionLog",
    "Scope",
    "SessionLog",
    "SettlingBinding",
    "SqliteSessionLog",
    "ToolArgsError",
    "ToolDefinition",
    "ToolDispatchExecution",
    "ToolErrorInfo",
    "ToolExecution",
    "ToolExecutionFailure",
    "ToolExecutionInput",
    "ToolExecutionResult",
    "ToolExecutionSuccess",
    "ToolFailure",
    "ToolNotFoundError",
    "ToolOutput",
    "ToolOutputError",
    "ToolRunContext",
    "ToolRuntime",
    "ToolSchema",
    "ToolTimeoutError",
    "define_tool",
    "reason_text",
    "text",
]
