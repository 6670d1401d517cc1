"""The guarded pipeline: one path for every call, native or nested.

Stage order (the contract every call follows):

1. ``create``     materialise the input: snapshot + deep-freeze the arguments (lossy
                  arguments are a *final* result), mint the token, capture the tool's
                  ``finalize_content``; apply the ``code`` collapse (final result).
2. pre-cancel     caller already aborted -> final ``ABORTED_BEFORE_DISPATCH``.
3. ``tools/pre-execute`` waterfall (default allow): allow | deny | ask.
4. ask            approval service outcome -> allow / deny (cancelled + caller aborted
                  -> post ``ABORTED_BEFORE_DISPATCH``).
5. guards         global first, then the scope chain (farthest first); first reason wins.
                  A denial is a *post* result (post-execute still runs).
6. cancel check   caller aborted -> post ``ABORTED_BEFORE_DISPATCH``.
   (a throwing pre-execute listener or approval service is a *final* result)
7. ``tools/execute`` waterfall around the body; wrappers may replace ``exec.signal``
                  (fused with the caller's for the body) or short-circuit. The body is
                  re-resolved here (missing -> ``UNKNOWN_TOOL``). Results authored by a
                  wrapper are normalised (successes re-validated from ``value``). Deferred
                  contexts are merged first. A throwing wrapper is a *final* result.
                  Caller aborted + success -> ``ABORTED`` / ``ABORTED_BEFORE_DISPATCH``.
8. ``tools/post-execute`` waterfall (default accept): accept(content | value) or block.
                  The cancel rule applies again. A throwing listener -> error result.
9. finish         materialise, ``finalize_content`` exactly once, materialise again.
10. ``tools/result`` observers (frozen exec and result; failures contained).

Within a waterfall the first registered listener is outermost; ``prepend=True`` goes
outside. Post-execute order therefore matches pre-execute order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from ._errors import AbortError, HarnessError, ToolNotFoundError, ToolOutputError
from ._execution import ToolExecution, ToolRunContext
from ._signals import AbortController, AbortSignal
from ._types import (
    Accept,
    Allow,
    Ask,
    Block,
    Deny,
    ToolDefinition,
    ToolErrorInfo,
    ToolExecutionFailure,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolExecutionSuccess,
    ToolFailure,
)
from .json import FrozenList, LosslessJsonError, snapshot

if TYPE_CHECKING:
    from ._hooks import HookRegistry
    from ._registry import Registry

__all__ = ["Pipeline", "Prepared", "error_message", "error_result"]

StageKind = Literal["dispatch", "post", "final"]


class Prepared(msgspec.Struct, frozen=True):
    """What ``prepare`` decided: dispatch the body, or a post/final result."""

    kind: StageKind
    exec: ToolRunContext
    result: ToolExecutionResult | None = None


# ------------------------------------------------------------------ helpers


def error_message(error: object) -> str:
    """The failure message of an arbitrary raised value (total: never raises)."""
    try:
        if isinstance(error, HarnessError):
            return error.message
        if isinstance(error, BaseException):
            text = str(error)
            if isinstance(error, KeyError) and len(error.args) == 1:
                text = str(error.args[0])
            return text or type(error).__name__
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return str(error["message"])
        return str(error)
    except Exception:
        return "<unprintable thrown value>"


def _error_info(error: object) -> ToolErrorInfo | None:
    if isinstance(error, HarnessError):
        return ToolErrorInfo(type(error).__name__, error.code, error.kind)
    return None


def error_result(
    error: object, additional_contexts: Sequence[Mapping[str, Any]] = ()
) -> ToolExecutionFailure:
    """The canonical failure for a raised value: ``Error: <message>`` content."""
    message = error_message(error)
    return ToolExecutionFailure(
        error=ToolFailure(message, _error_info(error)),
        content=[{"type": "text", "text": f"Error: {message}"}],
        additional_contexts=tuple(additional_contexts),
    )


def _denial(reason: str) -> ToolExecutionFailure:
    return ToolExecutionFailure(
        error=ToolFailure(reason), content=[{"type": "text", "text": f"Error: {reason}"}]
    )


def aborted_result(prior: ToolExecutionResult | None = None) -> ToolExecutionFailure:
    """``ABORTED``: cancellation superseded a success after the body was invoked."""
    return error_result(
        AbortError("tool call aborted", "ABORTED"),
        prior.additional_contexts if prior is not None else (),
    )


def aborted_before_dispatch_result(
    prior: ToolExecutionResult | None = None,
) -> ToolExecutionFailure:
    """``ABORTED_BEFORE_DISPATCH``: cancellation prevented the body."""
    return error_result(
        AbortError("tool call aborted before dispatch", "ABORTED_BEFORE_DISPATCH"),
        prior.additional_contexts if prior is not None else (),
    )


def _feedback_message(content: Sequence[Mapping[str, Any]]) -> str:
    parts = []
    for block in content:
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            parts.append(str(block.get("text", "")))
        else:
            parts.append(f"[{kind} content]")
    text = "\n".join(parts)
    return text if text else "tool result blocked by post-execute policy"


def _materialize(result: ToolExecutionResult) -> ToolExecutionResult:
    """Snapshot + deep-freeze the durable projection of a result (raises on lossy data)."""
    content = result.content
    if (
        type(content) is FrozenList
        and content._sealed is True
        and result.meta is None
        and not result.additional_contexts
        and (isinstance(result, ToolExecutionSuccess) or type(result.error) is ToolFailure)
    ):
        # Already a sealed (immutable, lossless) projection: nothing to copy.
        return result
    if not isinstance(result.content, (list, tuple)):
        # ``list("abc")`` would silently become three "blocks"; content is a block list.
        raise TypeError("tool result must be losslessly JSON-serializable")
    try:
        content = snapshot(list(result.content), label="content")
        meta = None if result.meta is None else snapshot(result.meta, label="meta")
        contexts = tuple(
            snapshot(c, label="additionalContexts") for c in result.additional_contexts
        )
    except LosslessJsonError as exc:
        raise TypeError("tool result must be losslessly JSON-serializable") from exc
    if isinstance(result, ToolExecutionFailure):
        if not isinstance(result.error, ToolFailure) or not isinstance(result.error.message, str):
            raise TypeError("tool result must be losslessly JSON-serializable")
        return ToolExecutionFailure(
            error=result.error, content=content, meta=meta, additional_contexts=contexts
        )
    return ToolExecutionSuccess(
        value=result.value,
        content=content,
        meta=meta,
        additional_contexts=contexts,
        concludes_turn=bool(result.concludes_turn),
    )


def _fuse(caller: AbortSignal, wrapper: AbortSignal) -> tuple[AbortSignal, Callable[[], None]]:
    # Not ``AbortSignal.any``: that one keeps its listeners on the sources until one
    # aborts, and a turn's caller signal outlives thousands of calls. The disposer
    # returned here unhooks both sources once the body has settled.
    if caller is wrapper:
        return caller, lambda: None
    if wrapper.aborted or caller.aborted:
        return AbortSignal.aborted_with(wrapper.reason if wrapper.aborted else caller.reason), (
            lambda: None
        )
    controller = AbortController()
    disposers: list[Callable[[], None]] = []

    def forward(source: AbortSignal) -> None:
        controller.abort(source.reason)
        dispose()

    def dispose() -> None:
        for d in disposers:
            d()
        disposers.clear()

    disposers.append(caller.add_listener(forward))
    disposers.append(wrapper.add_listener(forward))
    return controller.signal, dispose


_ALLOW = Allow()
_ACCEPT = Accept()


async def _allow() -> Allow:
    return _ALLOW


async def _accept() -> Accept:
    return _ACCEPT


# ----------------------------------------------------------------- pipeline


class Pipeline:
    """The staged execution of one ``ToolRuntime`` (see the module docstring)."""

    def __init__(self, registry: Registry, hooks: HookRegistry, approval: Any) -> None:
        self._registry = registry
        self._hooks = hooks
        self.approval = approval

    # ---------------------------------------------------------------- stage 1

    def create(self, input_: ToolExecutionInput) -> Prepared | ToolRunContext:
        """Materialise ``input_``; return a ready execution or a final result."""
        name = input_.name
        agent = input_.agent
        parent = input_.parent
        signal = input_.signal
        if not isinstance(signal, AbortSignal):
            raise TypeError("ToolExecutionInput.signal must be an AbortSignal")
        visible = self._registry.get(name, agent)
        collapsed = visible is not None and self._registry.collapses(
            name, agent, parent is not None
        )
        finalizer = visible.finalize_content if visible is not None else None
        if collapsed and not signal.aborted:
            finalizer = None
        try:
            arguments = snapshot(input_.arguments, label="arguments")
            failure: ToolExecutionResult | None = None
        except (LosslessJsonError, RecursionError):
            arguments = None
            failure = error_result(
                TypeError("tool execution arguments must be losslessly JSON-serializable")
            )
        except Exception as exc:
            # A getter throws: reading a hostile value raised. The
            # pipeline never raises for a call; the failure carries that message.
            arguments = None
            failure = error_result(exc)
        exec_ = ToolRunContext(
            call_id=input_.call_id,
            root_call_id=input_.root_call_id or input_.call_id,
            name=name,
            arguments=arguments,
            agent=agent,
            parent=parent,
            signal=signal,
            finalizer=finalizer,
        )
        if failure is not None:
            return Prepared("final", exec_, failure)
        if collapsed:
            if signal.aborted:
                return Prepared("final", exec_, aborted_before_dispatch_result())
            return Prepared(
                "final",
                exec_,
                error_result(
                    ToolNotFoundError(
                        f'unknown tool "{name}": only `run_code` is callable directly — call '
                        f"`{name}` from inside a `run_code` program instead"
                    )
                ),
            )
        return exec_

    # ------------------------------------------------------------- stages 2-6

    async def prepare(self, input_: ToolExecutionInput) -> Prepared:
        """Create the execution and run the ordered pre-execute/approval/guard gate."""
        created = self.create(input_)
        if isinstance(created, Prepared):
            return created
        exec_ = created
        caller = exec_._caller_signal
        if caller.aborted:
            return Prepared("final", exec_, aborted_before_dispatch_result())
        try:
            hooks = self._hooks
            if hooks.has("tools/pre-execute"):
                gate = await hooks.waterfall("tools/pre-execute", exec_.agent, (exec_,), _allow)
            else:
                gate = _ALLOW
            approval_cancelled = False
            if isinstance(gate, Ask):
                gate, approval_cancelled = await self._ask(exec_, gate)
            elif not isinstance(gate, (Allow, Deny)) or (
                # Fail closed: a Deny without a string reason must not read as "no denial".
                isinstance(gate, Deny) and not isinstance(gate.reason, str)
            ):
                raise TypeError(
                    f"tools/pre-execute returned {gate!r}; expected Allow(), Deny(reason) or "
                    "Ask(reason=None)"
                )
            if caller.aborted and approval_cancelled:
                return Prepared("post", exec_, aborted_before_dispatch_result())
            reason = self._registry.guard_reason(exec_) if isinstance(gate, Allow) else gate.reason
            if reason is not None:
                return Prepared("post", exec_, _materialize(_denial(reason)))
            if caller.aborted:
                return Prepared("post", exec_, aborted_before_dispatch_result())
            return Prepared("dispatch", exec_)
        except Exception as exc:
            return Prepared("final", exec_, error_result(exc))

    async def _ask(self, exec_: ToolExecution, ask: Ask) -> tuple[Allow | Deny, bool]:
        name = exec_.name
        if self.approval is None:
            # Only an absent reason gets the default; an empty reason ``""`` stays.
            default = f'tool "{name}" requires approval (not yet supported)'
            return Deny(default if ask.reason is None else ask.reason), False
        if exec_.agent is None:
            return (
                Deny(
                    f'tool "{name}" requires approval, but the call has no agent to route it through'
                ),
                False,
            )
        outcome = await self.approval.request(exec_, ask.reason)
        if outcome == "allowed-once":
            return Allow(), False
        if outcome == "rejected":
            return Deny(f'the user rejected tool "{name}"'), False
        if outcome == "cancelled":
            return Deny(f'approval for tool "{name}" was cancelled'), True
        if outcome == "unavailable":
            return (
                Deny(f'tool "{name}" requires approval, but no approval channel is available'),
                False,
            )
        raise TypeError(f"approval service returned unknown outcome {outcome!r}")

    # ---------------------------------------------------------------- stage 7

    async def dispatch(self, exec_: ToolRunContext) -> tuple[StageKind, ToolExecutionResult]:
        """Run the ``tools/execute`` chain and the body; ``("post"|"final", result)``."""
        try:
            if self._hooks.has("tools/execute"):

                async def body() -> ToolExecutionResult:
                    return await self._dispatch_body(exec_)

                result = await self._hooks.waterfall("tools/execute", exec_.agent, (exec_,), body)
            else:
                result = await self._dispatch_body(exec_)
            normalized = self._normalize(exec_, result)
            if exec_._deferred:
                merged = (*exec_._deferred, *normalized.additional_contexts)
                normalized = exec_._mark_canonical(
                    msgspec.structs.replace(normalized, additional_contexts=merged)
                )
            if exec_._caller_signal.aborted and not normalized.is_error:
                normalized = self._cancellation(exec_, normalized)
            return "post", normalized
        except Exception as exc:
            return "final", error_result(exc)

    async def _dispatch_body(self, exec_: ToolRunContext) -> ToolExecutionResult:
        wrapper_signal = exec_.signal
        signal, dispose = _fuse(exec_._caller_signal, wrapper_signal)
        if signal.aborted:
            dispose()
            return aborted_before_dispatch_result()
        object.__setattr__(exec_, "signal", signal)
        try:
            tool = self._registry.resolve_execution(
                exec_.name, exec_.agent, exec_.parent is not None
            )
            if tool is None:
                raise ToolNotFoundError(f'unknown tool "{exec_.name}"')
            exec_._set("_body_invoked", True)
            returned = await tool.execute(exec_.arguments, exec_)
            result = self.success(exec_, tool, returned)
            return aborted_result(result) if signal.aborted else result
        except Exception as exc:
            return error_result(exc)
        finally:
            dispose()
            object.__setattr__(exec_, "signal", wrapper_signal)

    def _normalize(self, exec_: ToolRunContext, result: object) -> ToolExecutionResult:
        if exec_._is_canonical(result):
            return result  # type: ignore[return-value]
        if isinstance(result, ToolExecutionFailure):
            return exec_._mark_canonical(
                ToolExecutionFailure(
                    error=result.error,
                    content=result.content,
                    meta=result.meta,
                    additional_contexts=tuple(result.additional_contexts),
                )
            )
        if not isinstance(result, ToolExecutionSuccess):
            raise TypeError(
                f"tools/execute returned {type(result).__name__}; expected a "
                "ToolExecutionSuccess or ToolExecutionFailure"
            )
        tool = self._registry.resolve_execution(exec_.name, exec_.agent, exec_.parent is not None)
        if tool is None:
            raise ToolNotFoundError(f'unknown tool "{exec_.name}"')
        normalized = self.success(exec_, tool, result.value)
        return exec_._mark_canonical(
            msgspec.structs.replace(
                normalized, additional_contexts=tuple(result.additional_contexts)
            )
        )

    def _cancellation(
        self, exec_: ToolExecution, prior: ToolExecutionResult | None = None
    ) -> ToolExecutionResult:
        if exec_._body_invoked:
            return aborted_result(prior)
        return aborted_before_dispatch_result(prior)

    def success(
        self, exec_: ToolExecution, tool: ToolDefinition, candidate: Any
    ) -> ToolExecutionSuccess:
        """Snapshot, validate, render and (top-level only) project a body value."""
        from .schema import validate_json_schema_value

        name = tool.name
        try:
            value = snapshot(candidate)
        except LosslessJsonError:
            raise ToolOutputError(
                f'tool "{name}" returned invalid output: value is not lossless JSON'
            ) from None
        except Exception as exc:  # e.g. RecursionError from a hostile object
            raise ToolOutputError(
                f'tool "{name}" returned invalid output: value snapshot failed: {error_message(exc)}'
            ) from None
        violations = validate_json_schema_value(tool.output.schema, value, "value")
        if violations:
            raise ToolOutputError(f'tool "{name}" returned invalid output: {"; ".join(violations)}')
        try:
            rendered = tool.output.render(exec_.arguments, value)
        except Exception as exc:
            raise ToolOutputError(
                f'tool "{name}" returned invalid output: output.render failed: {error_message(exc)}'
            ) from None
        content = self._projection(name, "render", rendered)
        if not isinstance(content, list):
            raise ToolOutputError(
                f'tool "{name}" returned invalid output: output.render returned non-lossless JSON'
            )
        meta = None
        if exec_.parent is None and tool.output.presentation_meta is not None:
            try:
                projected = tool.output.presentation_meta(exec_.arguments, value)
            except Exception as exc:
                raise ToolOutputError(
                    f'tool "{name}" returned invalid output: output.presentationMeta failed: '
                    f"{error_message(exc)}"
                ) from None
            meta = self._projection(name, "presentationMeta", projected)
        result = ToolExecutionSuccess(
            value=value, content=content, meta=meta, concludes_turn=exec_._concludes
        )
        return exec_._mark_canonical(result)  # type: ignore[return-value]

    @staticmethod
    def _projection(name: str, projector: str, candidate: Any) -> Any:
        try:
            if isinstance(candidate, tuple):
                candidate = list(candidate)
            return snapshot(candidate)
        except LosslessJsonError:
            raise ToolOutputError(
                f'tool "{name}" returned invalid output: output.{projector} returned '
                "non-lossless JSON"
            ) from None

    # ---------------------------------------------------------------- stage 8

    async def finalize(
        self, exec_: ToolRunContext, result: ToolExecutionResult
    ) -> ToolExecutionResult:
        """Post-execute, the cancel rule, then ``finish``."""
        try:
            post = await self._post_execute(exec_, result)
            if exec_._caller_signal.aborted and not post.is_error:
                post = self._cancellation(exec_, post)
            return await self.finish(exec_, post)
        except Exception as exc:
            return await self.finish(exec_, error_result(exc))

    async def _post_execute(
        self, exec_: ToolRunContext, result: ToolExecutionResult
    ) -> ToolExecutionResult:
        if not self._hooks.has("tools/post-execute"):
            decision: Any = _ACCEPT
        else:
            frozen = _materialize(result) if not exec_._is_canonical(result) else result
            decision = await self._hooks.waterfall(
                "tools/post-execute", exec_.agent, (exec_, frozen), _accept
            )
        if isinstance(decision, Block):
            feedback = list(decision.feedback)
            return exec_._mark_canonical(
                ToolExecutionFailure(
                    error=ToolFailure(_feedback_message(feedback)),
                    content=feedback,
                    additional_contexts=tuple(decision.additional_contexts),
                )
            )
        if not isinstance(decision, Accept):
            raise TypeError(
                f"tools/post-execute returned {decision!r}; expected Accept(...) or Block(...)"
            )
        has_value = decision.value is not msgspec.UNSET
        has_content = decision.content is not msgspec.UNSET
        if has_value and has_content:
            raise TypeError(
                "tools/post-execute accept decision cannot replace both value and content"
            )
        contexts = (*result.additional_contexts, *decision.additional_contexts)
        if has_value:
            if result.is_error:
                raise TypeError("tools/post-execute cannot replace the value of a failed result")
            tool = self._registry.resolve_execution(
                exec_.name, exec_.agent, exec_.parent is not None
            )
            if tool is None:
                raise ToolNotFoundError(f'unknown tool "{exec_.name}"')
            replaced = self.success(exec_, tool, decision.value)
            return exec_._mark_canonical(
                msgspec.structs.replace(replaced, additional_contexts=contexts)
            )
        changes: dict[str, Any] = {"additional_contexts": contexts}
        if has_content and decision.content is not None:
            changes["content"] = decision.content
        return exec_._mark_canonical(msgspec.structs.replace(result, **changes))

    # ---------------------------------------------------------------- stage 9

    async def finish(
        self, exec_: ToolRunContext, result: ToolExecutionResult
    ) -> ToolExecutionResult:
        """Materialise, ``finalize_content`` once, materialise, notify observers."""
        try:
            materialized = _materialize(result)
        except Exception as exc:
            materialized = _materialize(error_result(exc))
        final: ToolExecutionResult = materialized
        finalizer = exec_._finalizer
        if finalizer is not None:
            try:
                content = finalizer(exec_, materialized)
                if content is not None:
                    final = _materialize(msgspec.structs.replace(materialized, content=content))
            except Exception as exc:
                final = _materialize(error_result(exc))
        exec_._freeze()
        await self._hooks.notify_result(exec_.agent, exec_, final)
        return final

    # ----------------------------------------------------------------- whole

    async def complete(self, prepared: Prepared) -> ToolExecutionResult:
        """Run the stages that follow ``prepare``."""
        if prepared.kind == "dispatch":
            kind, result = await self.dispatch(prepared.exec)
            if kind == "post":
                return await self.finalize(prepared.exec, result)
            return await self.finish(prepared.exec, result)
        assert prepared.result is not None
        if prepared.kind == "post":
            return await self.finalize(prepared.exec, prepared.result)
        return await self.finish(prepared.exec, prepared.result)

    async def execute(self, input_: ToolExecutionInput) -> ToolExecutionResult:
        """The whole pipeline for one call."""
        return await self.complete(await self.prepare(input_))
