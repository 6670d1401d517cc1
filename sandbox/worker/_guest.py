"""The ``Guest`` protocol: what a guest module gives the fork server and the worker.

A guest is a module (named by dotted path in ``ServerConfig.guests``) that runs one
language's programs inside a worker: ``codemode.sandbox.python._guest`` (RestrictedPython),
``codemode.sandbox.typescript._worker`` (QuickJS) and the test-only
``codemode.sandbox.worker._raw_guest``. The fork server imports each once and calls
``warm``, then ``prepare_template`` (the state every worker inherits) before it locks
itself down; every forked worker calls ``prefault`` once it reported ready and ``serve``
with the ``run`` frame that names the guest.

Optional, on a guest module: ``EARLY_READER = True`` says that the guest reads the bridge
only through ``WorkerBridge.attach`` or ``wait_payloads`` (it never runs the worker's loop
on a socket of its own), so the worker may register the bridge's loop reader before it
reads the run frame (``WorkerBridge.listen``), off the run's path. A worker does so only
when every guest it loaded says so (the test-only raw guest does not).
"""

from __future__ import annotations

import asyncio
import importlib
from typing import Any, Protocol, runtime_checkable

from ._bridge import WorkerBridge
from ._frames import RunFrame

__all__ = ["Guest", "load_guest"]


@runtime_checkable
class Guest(Protocol):
    """A guest module, checked structurally (modules satisfy protocols)."""

    def warm(self) -> None:
        """Import and exercise what a run needs, once, in the fork server.

        After the fork a worker cannot read modules from disk, and pages the server
        touched are shared by every worker instead of copied into each.
        """

    def prepare_template(
        self, loop: asyncio.AbstractEventLoop, options: dict[str, Any] | None = None
    ) -> None:
        """Build, once in the fork server, what every worker's run starts from.

        Runs after ``warm``, under the run's address-space limit and before the server
        locks itself down (it may still read files). Every worker inherits a copy of
        what it builds, so nothing of one run reaches another. ``loop`` is closed
        afterwards (each worker makes its own); ``options`` are the runtime's
        ``warm_options`` for this module, if any.
        """

    def prefault(self, loop: asyncio.AbstractEventLoop) -> None:
        """Touch, in a fresh worker that reported ``ready``, the pages a run will write.

        A worker shares its pages with the fork server until it writes them; taking
        those copy-on-write faults while the worker idles keeps them off the run's
        latency. Runs locked down, before the ``run`` frame is read: it must not read
        files, and nothing it builds may reach the run.
        """

    def serve(self, run: RunFrame, bridge: WorkerBridge, loop: asyncio.AbstractEventLoop) -> None:
        """Execute ``run`` and send its ``done`` frame over ``bridge``."""


def load_guest(module_name: str) -> Guest:
    """Import ``module_name`` and check that it is a ``Guest``."""
    module = importlib.import_module(module_name)
    if not isinstance(module, Guest):
        raise TypeError(
            f"{module_name} is not a sandbox guest (needs warm, prepare_template, prefault, serve)"
        )
    return module
