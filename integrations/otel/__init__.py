"""OpenTelemetry: one span per tool execution (needs the ``otel`` extra's API package).

``instrument(rt)`` installs listeners on a ``ToolRuntime`` so that every native call,
every ``run_code`` and each of its program's sub-calls (as children of the run's span)
becomes an ``execute_tool {tool}`` span with the GenAI semantic-convention attributes;
it returns the disposer that removes them. Without an SDK configured the spans are
non-recording and cost next to nothing.
"""

from __future__ import annotations

from ._spans import ATTRIBUTES as ATTRIBUTES
from ._spans import instrument as instrument

__all__ = ["ATTRIBUTES", "instrument"]
