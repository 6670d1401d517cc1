"""A per-call pids cgroup for ``bash``: a fork bomb stops at ``pids.max`` processes, and
every process the call started — including ones that left its process group with
``setsid`` — is killed when the call ends.

Best effort: it needs a writable pids hierarchy (cgroup v1 ``/sys/fs/cgroup/pids``, or a
cgroup v2 mount whose root delegates ``pids``), which root hosts usually have. Without one
bash still runs, bounded only by its timeout and process-group kill, and a warning says so
once. The host's own processes are never placed in the cgroup: the child moves itself in
(``echo $$ > cgroup.procs``) before it ``exec``s the command, so nothing it forks escapes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
import uuid

__all__ = ["PidsCgroup"]

_log = logging.getLogger("tools.bash")
_warned = False
_V1 = "/sys/fs/cgroup/pids"


def _hierarchy_root() -> str | None:
    if os.path.isdir(_V1) and os.access(_V1, os.W_OK):
        return _V1
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) > 2 and fields[2] == "cgroup2":
                    root = fields[1]
                    with open(os.path.join(root, "cgroup.subtree_control"), encoding="utf-8") as f:
                        if "pids" in f.read().split() and os.access(root, os.W_OK):
                            return root
    except OSError:
        return None
    return None


def _warn_once(reason: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        _log.warning(
            "bash process limit unavailable (%s); a runaway command is bounded only by its "
            "timeout and process-group kill",
            reason,
        )


class PidsCgroup:
    """One call's cgroup (see module docstring). Create with ``PidsCgroup.create``."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def create(cls, max_pids: int) -> PidsCgroup | None:
        """A fresh cgroup limited to ``max_pids`` tasks, or ``None`` (warned once)."""
        root = _hierarchy_root()
        if root is None:
            _warn_once("no writable pids cgroup hierarchy")
            return None
        path = os.path.join(root, f"codemode-bash-{os.getpid()}-{uuid.uuid4().hex[:12]}")
        try:
            os.mkdir(path, 0o755)
            with open(os.path.join(path, "pids.max"), "w", encoding="ascii") as f:
                f.write(str(max_pids))
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.rmdir(path)
            _warn_once(f"cannot create a pids cgroup: {exc}")
            return None
        return cls(path)

    @property
    def procs_file(self) -> str:
        """The file a process writes its pid to in order to join."""
        return os.path.join(self.path, "cgroup.procs")

    def pids(self) -> list[int]:
        """The processes currently in the cgroup."""
        try:
            with open(self.procs_file, encoding="ascii") as f:
                return [int(line) for line in f if line.strip()]
        except OSError:
            return []

    def kill_all(self) -> None:
        """SIGKILL every member (a fork bomb may refill it: repeat until empty)."""
        for _ in range(50):
            members = self.pids()
            if not members:
                return
            for pid in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.002)

    def remove(self) -> None:
        """Kill what is left and delete the cgroup (retried briefly while it drains)."""
        self.kill_all()
        for _ in range(100):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.005)
                self.kill_all()
        _log.warning("could not remove bash cgroup %s", self.path)
