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

Phases: ``prepare`` (stages 1-6) returns a ``Gate`` — ``Dispatch`` when the body may run,
or an already ``Settled`` result; ``run`` (stage 7) turns a ``Dispatch`` into ``Settled``;
``commit`` (stages 8-10) turns ``Settled`` into the final result. A *post* result is a
``Settled`` with ``post_execute=True``, a *final* one has ``post_execute=False``.
Schedulers call the phases separately (bodies may overlap, commits are ordered);
``execute`` chains them. The tool definition is resolved once in stage 1 and carried on
the execution with the registry's version; stage 7 re-resolves it once (the body is what
is registered then), which is that same definition while the version holds (every
registration, removal, filter or mode change bumps it; ``run_code``'s definition also
follows the code runtime, so it is always looked up again). A nested call's stage 1
likewise takes the definition the sub-dispatch driver classified it with, at the same
version.

Within a waterfall the first registered listener is outermost; ``prepend=True`` goes
outside. Post-execute order therefore matches pre-execute order.

The per-call path reads a signal's ``_aborted`` slot where the public ``aborted``
property would cost a Python call each time (six per call).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from ._errors import ToolNotFoundError
from ._execution import ToolExecution, ToolRunContext, new_run_context
from ._results import (
    aborted_before_dispatch_result,
    aborted_result,
    denial_result,
    error_result,
    feedback_message,
    materialize,
    success_result,
)
from ._signals import AbortSignal, _no_op
from ._types import (
    Accept,
    Allow,
    Ask,
    Block,
    Deny,
    ToolDefinition,
    ToolExecutionFailure,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolExecutionSuccess,
    ToolFailure,
)
from .json import LosslessJsonError, snapshot

if TYPE_CHECKING:
    from ._hooks import HookRegistry
    from ._registry import Registry

__all__ = ["Dispatch", "Gate", "Pipeline", "Settled"]


class Dispatch(msgspec.Struct, frozen=True):
    """``prepare`` let the call through its gate: ``run`` may invoke the body."""

    exec: ToolRunContext


class Settled(msgspec.Struct, frozen=True):
    """A call's result before ``commit``.

    ``post_execute`` says whether the ``tools/post-execute`` waterfall (and the cancel
    rule after it) still applies: true for a gate denial and for whatever the body or
    the ``tools/execute`` chain produced, false for a *final* result (lossy arguments,
    the ``code`` collapse, an early abort, a throwing listener), which only ``finish``es.
    """

    exec: ToolRunContext
    result: ToolExecutionResult
    post_execute: bool


Gate = Dispatch | Settled
"""What ``prepare`` decided: run the body, or a result already settled."""

Resolved = tuple[ToolDefinition | None, int]
"""A definition and the registry version it was resolved at (``ToolRuntime.classify``)."""


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
        # The registry's listener lists by event (the same lists it registers into):
        # ``self._listening[event]`` is ``hooks.has(event)`` without a call, which the
        # hot path asks four times per call.
        self._listening = hooks._entries
        self.approval = approval

    # ---------------------------------------------------------------- stage 1

    def _create(
        self, input_: ToolExecutionInput, resolved: Resolved | None = None
    ) -> Settled | ToolRunContext:
        """Materialise ``input_``; return a ready execution or a final result."""
        name = input_.name
        agent = input_.agent
        parent = input_.parent
        signal = input_.signal
        if not isinstance(signal, AbortSignal):
            raise TypeError("ToolExecutionInput.signal must be an AbortSignal")
        registry = self._registry
        stamp = registry._version
        if (
            resolved is not None
            and parent is not None
            and registry.resolves_same(name, resolved[1])
        ):
            # The sub-dispatch driver classified this nested call at this very registry
            # version: its definition is the one a look-up returns now (a nested call
            # never collapses), without a second look-up.
            visible: ToolDefinition | None = resolved[0]
            collapsed = False
        else:
            visible = registry.get(name, agent)
            collapsed = visible is not None and registry.collapses(name, agent, parent is not None)
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
        exec_ = new_run_context(
            input_.call_id,
            input_.root_call_id or input_.call_id,
            name,
            arguments,
            agent,
            parent,
            signal,
            finalizer,
            # Resolved once here and carried: output validation (body, wrapper results,
            # post-execute value replacements) and per-tool policies read this one.
            None if collapsed else visible,
            input_.queued_at,
            stamp,
        )
        if failure is not None:
            return Settled(exec_, failure, post_execute=False)
        if collapsed:
            if signal.aborted:
                return Settled(exec_, aborted_before_dispatch_result(), post_execute=False)
            return Settled(
                exec_,
                error_result(
                    ToolNotFoundError(
                        f'unknown tool "{name}": only `run_code` is callable directly — call '
                        f"`{name}` from inside a `run_code` program instead"
                    )
                ),
                post_execute=False,
            )
        return exec_

    # ------------------------------------------------------------- stages 2-6

    async def prepare(self, input_: ToolExecutionInput) -> Gate:
        """Create the execution and run the ordered pre-execute/approval/guard gate."""
        created = self._create(input_)
        if isinstance(created, Settled):
            return created
        exec_ = created
        caller = exec_._caller_signal
        if caller.aborted:
            return Settled(exec_, aborted_before_dispatch_result(), post_execute=False)
        try:
            hooks = self._hooks
            if self._listening["tools/pre-execute"]:
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
                return Settled(exec_, aborted_before_dispatch_result(), post_execute=True)
            return self._guard(exec_, gate)
        except Exception as exc:
            return Settled(exec_, error_result(exc), post_execute=False)

    def prepare_now(
        self, input_: ToolExecutionInput, resolved: Resolved | None = None
    ) -> Gate | None:
        """``prepare`` without a coroutine when no ``tools/pre-execute`` listener is
        registered (then nothing in stages 1-6 can wait); ``None`` when one is.

        ``resolved``: the definition the caller resolved for this nested call and the
        registry version it did so at (``ToolRuntime.classify``), reused while that
        version holds."""
        if self._listening["tools/pre-execute"]:
            return None
        created = self._create(input_, resolved)
        if isinstance(created, Settled):
            return created
        exec_ = created
        if exec_._caller_signal._aborted:
            return Settled(exec_, aborted_before_dispatch_result(), post_execute=False)
        try:
            return self._guard(exec_, _ALLOW)
        except Exception as exc:
            return Settled(exec_, error_result(exc), post_execute=False)

    def _guard(self, exec_: ToolRunContext, gate: Allow | Deny) -> Gate:
        """Stages 5-6 after an allow/deny decision."""
        reason = self._registry.guard_reason(exec_) if isinstance(gate, Allow) else gate.reason
        if reason is not None:
            return Settled(exec_, materialize(denial_result(reason)), post_execute=True)
        if exec_._caller_signal._aborted:
            return Settled(exec_, aborted_before_dispatch_result(), post_execute=True)
        return Dispatch(exec_)

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

    async def run(self, gate: Dispatch) -> Settled:
        """Run the ``tools/execute`` chain and the body."""
        exec_ = gate.exec
        try:
            if self._listening["tools/execute"]:

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
            if exec_._caller_signal._aborted and not normalized.is_error:
                normalized = self._cancellation(exec_, normalized)
            return Settled(exec_, normalized, post_execute=True)
        except Exception as exc:
            return Settled(exec_, error_result(exc), post_execute=False)

    async def _dispatch_body(self, exec_: ToolRunContext) -> ToolExecutionResult:
        wrapper_signal = exec_.signal
        caller_signal = exec_._caller_signal
        linked = wrapper_signal is not caller_signal
        if not linked:
            # No wrapper gave the body a signal of its own (the common case): nothing to
            # link, swap in or dispose.
            if caller_signal._aborted:
                return aborted_before_dispatch_result()
            signal, dispose = caller_signal, _no_op
        else:
            # Wrapper first: when both have aborted, the wrapper's reason (a timeout,
            # say) wins.
            signal, dispose = AbortSignal.linked([wrapper_signal, caller_signal])
            if signal.aborted:
                dispose()
                return aborted_before_dispatch_result()
            object.__setattr__(exec_, "signal", signal)
        try:
            # The one re-resolution: the body is the definition registered *now*, after
            # pre-execute listeners and wrappers had their chance to (un)register it.
            # Unless the registry changed since stage 1 (its version), that is the
            # definition stage 1 resolved.
            registry = self._registry
            tool = exec_._tool
            if tool is None or not registry.resolves_same(exec_.name, exec_._stamp):
                tool = registry.resolve_execution(exec_.name, exec_.agent, exec_.parent is not None)
                exec_._set("_tool", tool)
                exec_._set("_stamp", registry._version)
            if tool is None:
                raise ToolNotFoundError(f'unknown tool "{exec_.name}"')
            exec_._set("_body_invoked", True)
            returned = await tool.execute(exec_.arguments, exec_)
            result = success_result(exec_, tool, returned)
            return aborted_result(result) if signal._aborted else result
        except Exception as exc:
            return error_result(exc)
        finally:
            if linked:
                dispose()
            # The wrapper's signal again (a body may have set one of its own).
            if exec_.signal is not wrapper_signal:
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
        normalized = success_result(exec_, _tool_of(exec_), result.value)
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

    # ---------------------------------------------------------------- stage 8

    async def _finalize(
        self, exec_: ToolRunContext, result: ToolExecutionResult
    ) -> ToolExecutionResult:
        """Post-execute, the cancel rule, then ``finish``."""
        try:
            post = await self._post_execute(exec_, result)
            if exec_._caller_signal.aborted and not post.is_error:
                post = self._cancellation(exec_, post)
            return await self._finish(exec_, post)
        except Exception as exc:
            return await self._finish(exec_, error_result(exc))

    async def _post_execute(
        self, exec_: ToolRunContext, result: ToolExecutionResult
    ) -> ToolExecutionResult:
        if not self._listening["tools/post-execute"]:
            decision: Any = _ACCEPT
        else:
            frozen = materialize(result) if not exec_._is_canonical(result) else result
            decision = await self._hooks.waterfall(
                "tools/post-execute", exec_.agent, (exec_, frozen), _accept
            )
        return self._decide(exec_, result, decision)

    def _decide(
        self, exec_: ToolRunContext, result: ToolExecutionResult, decision: Any
    ) -> ToolExecutionResult:
        """Apply a post-execute decision to ``result``."""
        if decision is _ACCEPT and result.additional_contexts == ():
            # The default accept with nothing to merge: the result as it stands (the
            # general path below would build an equal copy).
            return exec_._mark_canonical(result)
        if isinstance(decision, Block):
            feedback = list(decision.feedback)
            return exec_._mark_canonical(
                ToolExecutionFailure(
                    error=ToolFailure(feedback_message(feedback)),
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
            replaced = success_result(exec_, _tool_of(exec_), decision.value)
            return exec_._mark_canonical(
                msgspec.structs.replace(replaced, additional_contexts=contexts)
            )
        changes: dict[str, Any] = {"additional_contexts": contexts}
        if has_content and decision.content is not None:
            changes["content"] = decision.content
        return exec_._mark_canonical(msgspec.structs.replace(result, **changes))

    # ---------------------------------------------------------------- stage 9

    async def _finish(
        self, exec_: ToolRunContext, result: ToolExecutionResult
    ) -> ToolExecutionResult:
        """Materialise, ``finalize_content`` once, materialise, notify observers."""
        final = self._finish_now(exec_, result)
        await self._hooks.notify_result(exec_.agent, exec_, final)
        return final

    def _finish_now(
        self, exec_: ToolRunContext, result: ToolExecutionResult
    ) -> ToolExecutionResult:
        """Stage 9 up to the observers: materialise, ``finalize_content`` once,
        materialise, freeze the execution."""
        try:
            materialized = materialize(result)
        except Exception as exc:
            materialized = materialize(error_result(exc))
        final: ToolExecutionResult = materialized
        finalizer = exec_._finalizer
        if finalizer is not None:
            try:
                content = finalizer(exec_, materialized)
                if content is not None:
                    final = materialize(msgspec.structs.replace(materialized, content=content))
            except Exception as exc:
                final = materialize(error_result(exc))
        exec_._freeze()
        return final

    # ----------------------------------------------------------------- whole

    async def commit(self, settled: Settled) -> ToolExecutionResult:
        """Post-execute (when it applies), ``finish`` and the ``tools/result`` observers."""
        if settled.post_execute:
            return await self._finalize(settled.exec, settled.result)
        return await self._finish(settled.exec, settled.result)

    def commit_now(self, settled: Settled) -> ToolExecutionResult | None:
        """``commit`` without a coroutine when neither a ``tools/post-execute`` listener nor
        a ``tools/result`` observer is registered (then nothing in stages 8-10 can wait);
        ``None`` when one is."""
        listening = self._listening
        if listening["tools/post-execute"] or listening["tools/result"]:
            return None
        exec_ = settled.exec
        result = settled.result
        if not settled.post_execute:
            return self._finish_now(exec_, result)
        try:
            post = self._decide(exec_, result, _ACCEPT)
            if exec_._caller_signal._aborted and not post.is_error:
                post = self._cancellation(exec_, post)
            return self._finish_now(exec_, post)
        except Exception as exc:
            return self._finish_now(exec_, error_result(exc))

    async def settle(self, gate: Gate) -> Settled:
        """``run`` a dispatched gate; a settled one is already its own result."""
        return gate if isinstance(gate, Settled) else await self.run(gate)

    async def execute(self, input_: ToolExecutionInput) -> ToolExecutionResult:
        """The whole pipeline for one call."""
        gate = self.prepare_now(input_)
        if gate is None:
            gate = await self.prepare(input_)
        settled = gate if isinstance(gate, Settled) else await self.run(gate)
        final = self.commit_now(settled)
        return final if final is not None else await self.commit(settled)


def _tool_of(exec_: ToolExecution) -> ToolDefinition:
    """The definition carried by ``exec_`` (``UNKNOWN_TOOL`` when none resolved)."""
    tool: ToolDefinition | None = exec_._tool
    if tool is None:
        raise ToolNotFoundError(f'unknown tool "{exec_.name}"')
    return tool
