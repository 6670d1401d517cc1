"""Code mode: ``run_code`` and the programs it runs, on the engine side of the sandbox seam.

Layout: ``_seam`` is the ``CodeRuntime`` protocol and its data (``CodeRunRequest``,
``Binding``, ``CodeRunResult``, ...) that a sandbox implements; ``_tool`` builds the
reserved ``run_code`` tool and ``CodeMode``, the object a ``ToolRuntime`` owns for it;
``_driver`` is the single-lane sub-dispatch driver that sends every ``tools.x(...)``
call of a program back through the runtime's pipeline and commits results in order.
The rest of engine imports code mode from here.
"""

from __future__ import annotations

from ._driver import CodeDispatchLog as CodeDispatchLog
from ._driver import SubDispatchDriver as SubDispatchDriver
from ._seam import ERROR_KINDS as ERROR_KINDS
from ._seam import Binding as Binding
from ._seam import CodeRunError as CodeRunError
from ._seam import CodeRunRequest as CodeRunRequest
from ._seam import CodeRunResult as CodeRunResult
from ._seam import CodeRuntime as CodeRuntime
from ._seam import ErrorClass as ErrorClass
from ._seam import ErrorKind as ErrorKind
from ._seam import SettlingBinding as SettlingBinding
from ._seam import validate_bindings as validate_bindings
from ._tool import CODE_ONLY_INSTRUCTION as CODE_ONLY_INSTRUCTION
from ._tool import DEFAULT_QUOTED_OUTPUT_CHARS as DEFAULT_QUOTED_OUTPUT_CHARS
from ._tool import RUN_CODE_FLAVORS as RUN_CODE_FLAVORS
from ._tool import CodeMode as CodeMode
from ._tool import make_run_code_tool as make_run_code_tool
from ._tool import render_run_code_value as render_run_code_value

__all__ = [
    "Binding",
    "CODE_ONLY_INSTRUCTION",
    "CodeDispatchLog",
    "CodeMode",
    "CodeRunError",
    "CodeRunRequest",
    "CodeRunResult",
    "CodeRuntime",
    "DEFAULT_QUOTED_OUTPUT_CHARS",
    "ERROR_KINDS",
    "ErrorClass",
    "ErrorKind",
    "RUN_CODE_FLAVORS",
    "SettlingBinding",
    "SubDispatchDriver",
    "make_run_code_tool",
    "render_run_code_value",
    "validate_bindings",
]
