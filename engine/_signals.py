"""Cooperative cancellation: ``AbortController`` and ``AbortSignal``.

Modelled on the web platform's pair because the seed's pipeline is specified in terms of
it: a signal is aborted at most once, carries a ``reason``, and can be fused with others
(``AbortSignal.any``). Aborting is synchronous and never raises into the aborter; listener
failures are contained. ``await signal.wait()`` blocks until the signal aborts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import anyio

__all__ = ["AbortController", "AbortSignal"]

_log = logging.getLogger("engine.signals")

_NO_REASON = "This operation was aborted"


def _no_op() -> None:
    return None


class AbortSignal:
    """A read-only view of an abort state. Create one with ``AbortController().signal``."""

    __slots__ = ("__weakref__", "_aborted", "_listeners", "_reason")

    def __init__(self) -> None:
        self._aborted = False
        self._reason: Any = None
        self._listeners: list[Callable[[AbortSignal], None]] = []

    @property
    def aborted(self) -> bool:
        """True once the signal has been aborted."""
        return self._aborted

    @property
    def reason(self) -> Any:
        """The abort reason (``None`` until aborted)."""
        return self._reason

    def add_listener(self, listener: Callable[[AbortSignal], None]) -> Callable[[], None]:
        """Call ``listener(signal)`` once when the signal aborts (at once if it already has).

        Returns a disposer that removes the listener.
        """
        if self._aborted:
            _call_contained(listener, self)
            return lambda: None
        self._listeners.append(listener)

        def dispose() -> None:
            try:
                self._listeners.remove(listener)
            except ValueError:
                pass

        return dispose

    async def wait(self) -> None:
        """Block until the signal aborts."""
        if self._aborted:
            return
        event = anyio.Event()
        dispose = self.add_listener(lambda _s: event.set())
        try:
            await event.wait()
        finally:
            dispose()

    def throw_if_aborted(self) -> None:
        """Raise ``AbortError`` carrying the reason if the signal is aborted."""
        if self._aborted:
            from ._errors import AbortError

            raise AbortError(reason_text(self._reason))

    def _abort(self, reason: Any) -> None:
        if self._aborted:
            return
        self._aborted = True
        self._reason = _NO_REASON if reason is None else reason
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            _call_contained(listener, self)

    @staticmethod
    def any(signals: Iterable[AbortSignal]) -> AbortSignal:
        """A signal that aborts as soon as any of ``signals`` does, with that one's reason.

        Its listeners stay on the sources until one of them aborts; for a signal that
        lives shorter than its sources (one call under a turn's signal), use ``linked``.
        """
        return AbortSignal.linked(signals)[0]

    @staticmethod
    def linked(signals: Iterable[AbortSignal]) -> tuple[AbortSignal, Callable[[], None]]:
        """``any(signals)`` plus a disposer that unhooks it from every source.

        A long-lived source (a turn's signal under thousands of calls) would otherwise
        keep one listener per derived signal until it aborts; call the disposer once the
        derived signal is no longer needed. One signal is returned as it is.
        """
        sources = list(dict.fromkeys(signals))  # the same signal twice needs one hook
        if len(sources) == 1:
            return sources[0], _no_op
        controller = AbortController()
        for source in sources:
            if source.aborted:
                controller.abort(source.reason)
                return controller.signal, _no_op
        disposers: list[Callable[[], None]] = []

        def dispose() -> None:
            for d in disposers:
                d()
            disposers.clear()

        def forward(source: AbortSignal) -> None:
            dispose()
            controller.abort(source.reason)

        for source in sources:
            disposers.append(source.add_listener(forward))
        return controller.signal, dispose

    @staticmethod
    def aborted_with(reason: Any = None) -> AbortSignal:
        """An already-aborted signal."""
        controller = AbortController()
        controller.abort(reason)
        return controller.signal

    def __repr__(self) -> str:
        state = f"aborted, reason={self._reason!r}" if self._aborted else "live"
        return f"<AbortSignal {state}>"


class AbortController:
    """Owns an ``AbortSignal`` and aborts it."""

    __slots__ = ("_signal",)

    def __init__(self) -> None:
        self._signal = AbortSignal()

    @property
    def signal(self) -> AbortSignal:
        """The controlled signal."""
        return self._signal

    def abort(self, reason: Any = None) -> None:
        """Abort the signal (idempotent: the first reason wins)."""
        self._signal._abort(reason)


def reason_text(reason: Any) -> str:
    """The text of an abort reason, as every ``abort`` error message shows it.

    An exception renders as its message (or its class name when the message is empty),
    ``None`` as ``"This operation was aborted"`` (the default reason of ``abort()``), and
    anything else as ``str(reason)``, like JavaScript's ``String(reason)``.
    """
    if isinstance(reason, BaseException):
        return str(reason) or type(reason).__name__
    if reason is None:
        return _NO_REASON
    return str(reason)


def _call_contained(listener: Callable[[AbortSignal], None], signal: AbortSignal) -> None:
    try:
        listener(signal)
    except Exception:  # a faulty listener must not break the aborter
        _log.warning("abort listener raised", exc_info=True)
