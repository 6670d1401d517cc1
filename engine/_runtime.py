"""``ToolRuntime``: the registry plus the guarded pipeline, the public entry point."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from codemode.sdk_gen import SdkTool, render_sdk

from ._execution import ToolExecution
from ._hooks import HookRegistry
from ._pipeline import Pipeline
from ._registry import MODES, RUN_CODE_NAME, Registry
from ._scope import Scope
from ._session import SessionLog
from ._types import ToolDefinition, ToolExecutionInput, ToolExecutionResult, ToolSchema
from .code_mode import CODE_ONLY_INSTRUCTION, DEFAULT_QUOTED_OUTPUT_CHARS, CodeMode
from .json import snapshot

__all__ = ["ToolRuntime"]

Disposer = Callable[[], None]


class ToolRuntime:
    """The tool registry and the guarded pipeline every call goes through.

    ``mode`` is the deployment default presentation (``"native" | "code" | "both"``);
    scopes may override it with ``present_as``. ``max_parallel_sub_calls`` caps how many
    ``run_code`` sub-call bodies overlap (1 = serial). ``code_runtime`` runs programs
    (required for code modes); ``approval`` resolves ``Ask`` decisions.

    ``max_quoted_output_chars`` bounds the captured output a failed ``run_code`` quotes
    after ``Captured output:`` (default 1 MiB of characters). Past it the message quotes
    the first and the last half of that many characters around a line that says how
    many were left out: a run that floods to the 64 MiB output cap then costs the host
    its logs once, not the logs plus two messages quoting them. ``None`` quotes all of
    it, as the reference message does (the CLI's ``run`` does, to print every line).
    """

    def __init__(
        self,
        *,
        mode: str = "native",
        max_parallel_sub_calls: int = 10,
        code_runtime: Any = None,
        approval: Any = None,
        max_quoted_output_chars: int | None = DEFAULT_QUOTED_OUTPUT_CHARS,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f'unknown tool presentation mode "{mode}" (known: native, code, both)')
        if (
            isinstance(max_parallel_sub_calls, bool)
            or not isinstance(max_parallel_sub_calls, int)
            or max_parallel_sub_calls < 1
        ):
            raise ValueError("ToolRuntime(max_parallel_sub_calls=...) must be a positive integer")
        self.max_parallel_sub_calls = max_parallel_sub_calls
        if max_quoted_output_chars is not None and (
            isinstance(max_quoted_output_chars, bool)
            or not isinstance(max_quoted_output_chars, int)
            or max_quoted_output_chars < 2
        ):
            raise ValueError(
                "ToolRuntime(max_quoted_output_chars=...) must be None or an integer >= 2"
            )
        self.max_quoted_output_chars = max_quoted_output_chars
        self.code_runtime = code_runtime
        self._hooks = HookRegistry()
        # The registry gets the code-mode object's ``run_code`` provider, not the runtime:
        # the object graph is runtime -> (code mode, registry, pipeline), with no way back.
        self._code_mode = CodeMode(self, self._hooks)
        self._registry = Registry(self._hooks, mode, self._code_mode.definition)
        self._pipeline = Pipeline(self._registry, self._hooks, approval)
        self._code_mode.bind(self._registry, self._pipeline)
        # Host facts for the SDK's "sandbox facts" block (e.g. ``workspace``,
        # ``read_before_write``); merged over the code runtime's own ``sdk_facts()``.
        self.sdk_facts: dict[str, Any] = {}

    # ------------------------------------------------------------ configuration

    @property
    def mode(self) -> str:
        """The deployment default presentation mode."""
        return self._registry.default_mode

    @property
    def pipeline(self) -> Pipeline:
        """The staged pipeline (engine-internal: the native scheduler drives its phases)."""
        return self._pipeline

    @property
    def approval(self) -> Any:
        """The approval service (``async request(exec, reason) -> outcome``) or None."""
        return self._pipeline.approval

    @approval.setter
    def approval(self, service: Any) -> None:
        self._pipeline.approval = service

    def scope(
        self, name: str, *, parent: Scope | None = None, session: SessionLog | None = None
    ) -> Scope:
        """Create an agent scope, optionally chained under ``parent``."""
        if parent is not None and (not isinstance(parent, Scope) or parent.runtime is not self):
            raise ValueError("scope parent must be a Scope of this runtime")
        return Scope(self, name, parent, session)

    def register(self, definition: ToolDefinition) -> Disposer:
        """Register a tool globally; returns its exact disposer."""
        return self._registry.register(definition, None)

    def guard(self, fn: Callable[[ToolExecution], str | None]) -> Disposer:
        """Add a global monotonic guard (``fn(exec) -> reason | None``)."""
        return self._registry.guard(fn, None)

    def on(self, event: str, listener: Callable[..., Any], *, prepend: bool = False) -> Disposer:
        """Listen to ``event`` globally (see ``engine`` docs for the events)."""
        return self._hooks.on(event, listener, owner=None, prepend=prepend)

    # -------------------------------------------------------------------- views

    def get(self, name: str, scope: Scope | None = None) -> ToolDefinition | None:
        """The definition ``scope`` sees for ``name`` (None when not visible)."""
        return self._registry.get(name, scope)

    def mode_for(self, scope: Scope | None = None) -> str:
        """The effective presentation mode of ``scope``."""
        return self._registry.mode_for(scope)

    def schemas(self, scope: Scope | None = None) -> list[ToolSchema]:
        """The wire tool list for ``scope``'s mode (exactly name/description/parameters)."""
        mode = self._registry.mode_for(scope)
        if mode != "native":
            self._code_mode.require_code_runtime(mode)
        visible = self._registry.view(scope)
        out = [
            ToolSchema(d.name, d.description, snapshot(d.parameters, freeze=False))
            for d in visible.values()
        ]
        if mode == "code":
            return [s for s in out if s.name == RUN_CODE_NAME]
        return out

    def sdk_tools(self, scope: Scope | None = None) -> list[Any]:
        """The tools the SDK declares for ``scope``: its view minus ``run_code``."""
        return [
            SdkTool(
                name=d.name,
                description=d.description,
                parameters=snapshot(d.parameters, freeze=False),
                output_schema=snapshot(d.output.schema, freeze=False),
            )
            for d in self._registry.view(scope).values()
            if d.name != RUN_CODE_NAME
        ]

    def system_prompt_sections(self, scope: Scope | None = None) -> dict[str, str]:
        """``{"tools:code-only": ..., "tools:sdk": ...}`` regenerated from the live view."""
        mode = self._registry.mode_for(scope)
        if mode == "native":
            return {"tools:code-only": "", "tools:sdk": ""}
        runtime = self._code_mode.require_code_runtime(mode)
        # `sdk_facts()` is optional on the CodeRuntime seam; a runtime without it (or one
        # that fails) simply states no facts of its own.
        facts_of = getattr(runtime, "sdk_facts", None)
        try:
            facts: dict[str, Any] = dict(facts_of()) if callable(facts_of) else {}
        except Exception:
            facts = {}
        facts.update(self.sdk_facts)
        return {
            "tools:code-only": CODE_ONLY_INSTRUCTION if mode == "code" else "",
            "tools:sdk": render_sdk(self.sdk_tools(scope), runtime.language, facts),
        }

    def execution_mode(self, input_: ToolExecutionInput) -> str:
        """``"parallel"`` only when the resolved tool's classifier returns exactly True."""
        return self.classify(input_)[0]

    def classify(self, input_: ToolExecutionInput) -> tuple[str, ToolDefinition | None, int]:
        """``execution_mode``, the definition it classified with and the registry version
        it was resolved at (engine-internal: the sub-dispatch driver reuses the definition
        for the call's start event, and the pipeline's stage 1 while the version holds,
        instead of looking it up again)."""
        registry = self._registry
        stamp = registry._version
        tool = registry.resolve_execution(input_.name, input_.agent, input_.parent is not None)
        if tool is None or tool.is_concurrency_safe is None:
            return "exclusive", tool, stamp
        try:
            safe = tool.is_concurrency_safe(input_.arguments) is True
        except Exception:
            return "exclusive", tool, stamp
        return ("parallel" if safe else "exclusive"), tool, stamp

    # --------------------------------------------------------------- execution

    async def execute(self, input_: ToolExecutionInput) -> ToolExecutionResult:
        """Run one call through the whole pipeline; failures are results, not raises."""
        return await self._pipeline.execute(input_)
