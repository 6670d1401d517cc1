"""``new_run_context``, the pipeline's fast constructor: the same object as
``ToolRunContext(...)`` makes, as read-only afterwards."""

from __future__ import annotations

import pytest

from codemode.engine import AbortController, ToolRunContext
from codemode.engine._execution import ExecutionToken, ToolExecution, new_run_context

_FIELDS = [s for cls in ToolExecution.__mro__ for s in getattr(cls, "__slots__", ())]


def test_the_fast_constructor_builds_what_the_initialiser_builds() -> None:
    signal = AbortController().signal

    def finalizer(exec_: object, result: object) -> None:
        return None

    kwargs = dict(
        call_id="c1",
        root_call_id="r1",
        name="echo",
        arguments={"a": 1},
        agent=None,
        parent="p",
        signal=signal,
        finalizer=finalizer,
        tool=None,
        queued_at=2.5,
    )
    slow = ToolRunContext(**kwargs)  # type: ignore[arg-type]
    fast = new_run_context(**kwargs)  # type: ignore[arg-type]
    assert type(fast) is ToolRunContext
    for field in _FIELDS:
        a, b = getattr(slow, field), getattr(fast, field)
        if isinstance(a, ExecutionToken):
            assert isinstance(b, ExecutionToken) and repr(a) == repr(b)
        else:
            assert a == b, field
    assert fast._deferred is not slow._deferred and fast._canonical is not slow._canonical
    with pytest.raises(AttributeError, match=r"ToolExecution\.name is read-only"):
        fast.name = "other"  # type: ignore[misc]
    fast.signal = AbortController().signal  # only the signal is replaceable, as before
    fast._freeze()
    with pytest.raises(AttributeError, match="read-only"):
        fast.signal = signal
