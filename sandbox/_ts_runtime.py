"""``TypeScriptRuntime``: TypeScript programs in the same sandboxed workers as Python.

Everything but the guest is ``ProcessRuntime``'s: the fork server, the pool, the bridge,
the supervisor and its limits, the boundary. What differs:

1. The host strips the types (``typescript._strip``) before any worker is used; non-erasable
   syntax or a syntax error is a ``syntax`` result with the stripper's message, and no
   worker is touched (the shared ``ErrorKind`` vocabulary gives parse failures their own
   kind in both languages, rather than the generic ``exception``).
2. The worker runs the stripped program in QuickJS (``typescript._worker`` driving
   ``typescript._guest.JsGuest``); each new worker builds its context ahead of the run with this
   runtime's limits.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, ClassVar

import msgspec

from codemode.engine import CodeRunError, CodeRunRequest, CodeRunResult

from ._limits import Limits
from ._runtime import ProcessRuntime
from .host._prefault import MAX_PAGES
from .typescript._options import TsGuestOptions
from .typescript._strip import TypeStripError, strip_types

__all__ = ["TypeScriptRuntime"]

_GUEST_MODULE = "codemode.sandbox.typescript._worker"
# Stripped programs kept for recurring ones (a pure function of the text, in the host):
# the strip is ~30 us hot for ``return 1`` but ~0.15 ms on a warm run's path, and a
# 15-line class ~0.3 ms hot. Programs above the size cap are stripped every time.
_STRIPPED_ENTRIES = 64
_STRIPPED_MAX_CHARS = 64 << 10


class TypeScriptRuntime(ProcessRuntime):
    """Runs TypeScript programs (the body of an async function, erasable syntax only) in
    QuickJS inside sandboxed worker processes; see ``sandbox/README.md``.

    ``async with TypeScriptRuntime(Limits(...)) as runtime: await runtime.run(request)``
    """

    language: ClassVar[str] = "typescript"
    guest: ClassVar[str] = "typescript"
    guest_modules: ClassVar[dict[str, str]] = {"typescript": _GUEST_MODULE}
    # QuickJS stops a hot loop at the budget itself, after which the worker still ships
    # the logs of the interrupted slice; the supervisor's kill is the backstop.
    _compute_grace_s: ClassVar[float] = 0.25
    # A warm run copies 90-150 pages of QuickJS's prepared context (~3 µs each): learned
    # and faulted in by the spares, 0.98 -> 0.76 ms per warm start, for +0.35 MB of a
    # spare's private memory (2.57 -> 2.92 MB), well under the 3.5 MB target.
    _prefault_pages: ClassVar[int] = MAX_PAGES

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        start_in_background: bool = False,
        _guests: dict[str, str] | None = None,
    ) -> None:
        super().__init__(limits, start_in_background=start_in_background, _guests=_guests)
        # The worker builds its QuickJS limits from these (``TsGuestOptions``); the same
        # options travel in every ``run`` frame, so a worker prepared with other options
        # builds a fresh context instead.
        self._options: dict[str, Any] = msgspec.to_builtins(TsGuestOptions.from_limits(self.limits))
        self._stripped: OrderedDict[str, str] = OrderedDict()

    async def __aenter__(self) -> TypeScriptRuntime:
        await super().__aenter__()
        return self

    def _warm_options(self) -> dict[str, dict[str, Any]]:
        return {_GUEST_MODULE: self._options}

    async def _execute(self, request: CodeRunRequest) -> CodeRunResult:
        try:
            program = self._strip(request.program)
        except TypeStripError as exc:
            return CodeRunResult(logs=[], error=CodeRunError("syntax", exc.message))
        stripped = msgspec.structs.replace(request, program=program)
        return await self._run_guest(stripped, self.guest, self._options)

    def _strip(self, source: str) -> str:
        """``strip_types(source)``, from the cache when the program was stripped before
        (errors are not kept: they raise again)."""
        cache = self._stripped
        stripped = cache.get(source)
        if stripped is not None:
            cache.move_to_end(source)
            return stripped
        stripped = strip_types(source)
        if len(source) <= _STRIPPED_MAX_CHARS:
            cache[source] = stripped
            if len(cache) > _STRIPPED_ENTRIES:
                cache.popitem(last=False)
        return stripped
