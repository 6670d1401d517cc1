"""``SpillPolicy``: bound oversized text results by saving them to a spill store.

Two arms:
- a prepended ``tools/post-execute`` listener that, after the inner chain decided
  ``accept`` without a value replacement, replaces an all-text content larger than
  ``max_inline_bytes`` UTF-8 bytes of a *top-level* call (any tool but ``read``) with a
  head/tail preview and a notice naming the saved file;
- a ``tools/code-dispatch-log`` listener applying the same transform to the durable log
  copy of every ``run_code`` sub-result (``read`` included); the program's value is never
  touched.
Best-effort: no agent, no store, or a save error keeps the original (logged).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from .._types import Accept, text
from ._spill_preview import spill_preview, utf8_len

if TYPE_CHECKING:
    from .._runtime import ToolRuntime
    from ._spill_store import SpillStore

__all__ = ["SpillPolicy"]

_log = logging.getLogger("engine.spill")


def _all_text(content: Sequence[Mapping[str, Any]]) -> str | None:
    parts = []
    for block in content:
        if not isinstance(block, Mapping) or block.get("type") != "text":
            return None
        parts.append(str(block.get("text", "")))
    return "".join(parts)


class SpillPolicy:
    """Spill oversized results to ``store`` (see module docstring).

    ``max_inline_bytes=None`` leaves the policy off (``install`` is a no-op); otherwise it
    must be a non-negative integer.
    """

    def __init__(self, store: SpillStore | None, *, max_inline_bytes: int | None = None) -> None:
        if max_inline_bytes is not None and (
            isinstance(max_inline_bytes, bool)
            or not isinstance(max_inline_bytes, int)
            or max_inline_bytes < 0
        ):
            raise ValueError("SpillPolicy(max_inline_bytes=...) must be a non-negative integer")
        self.store = store
        self.max_inline_bytes = max_inline_bytes

    async def _bound(
        self,
        content: Sequence[Mapping[str, Any]],
        name: str,
        label: str,
        call_id: str,
        owner: Any,
    ) -> list[dict[str, Any]] | None:
        cap = self.max_inline_bytes
        assert cap is not None
        full = _all_text(content)
        if full is None or utf8_len(full) <= cap:
            return None
        if owner is None:
            _log.warning(
                "spill: no session owner for %s %s; keeping the inline content", name, label
            )
            return None
        if self.store is None:
            _log.warning("spill: no store configured; keeping the %s result of %s", label, name)
            return None
        try:
            locator = await self.store.save(
                full, suggested_name=f"{name}.txt", label=label, call_id=call_id
            )
        except Exception as exc:
            _log.warning("spill: saving the %s result of %s failed: %s", label, name, exc)
            return None
        preview = spill_preview(full, cap, locator, self.store.retrieval_hint)
        if preview is None:
            _log.warning(
                "spill: the notice for %s exceeds max_inline_bytes; keeping the inline content",
                name,
            )
            return None
        return [text(preview)]

    def install(self, runtime: ToolRuntime) -> Callable[[], None]:
        """Install both arms globally; returns one disposer for both."""
        if self.max_inline_bytes is None:
            return lambda: None

        async def post(exec_: Any, result: Any, next_: Callable[[], Any]) -> Any:
            decision = await next_()
            if (
                not isinstance(decision, Accept)
                or decision.value is not msgspec.UNSET
                or exec_.parent is not None
                or exec_.name == "read"
            ):
                return decision
            replaced = decision.content
            content = result.content if replaced is msgspec.UNSET or replaced is None else replaced
            bounded = await self._bound(content, exec_.name, "result", exec_.call_id, exec_.agent)
            if bounded is None:
                return decision
            return Accept(content=bounded, additional_contexts=decision.additional_contexts)

        async def dispatch_log(dispatch: Any, next_: Callable[[], Any]) -> Any:
            content = await next_()
            bounded = await self._bound(
                content, dispatch.name, "dispatch", dispatch.sub_call_id, dispatch.exec.agent
            )
            return content if bounded is None else bounded

        off_post = runtime.on("tools/post-execute", post, prepend=True)
        # Both arms are prepended: they bound whatever the other
        # listeners of their waterfall settled on.
        off_log = runtime.on("tools/code-dispatch-log", dispatch_log, prepend=True)

        def dispose() -> None:
            off_post()
            off_log()

        return dispose
