"""Containment for ``bash``: the call's cgroup, one of three nets that make sure nothing a
call starts outlives it.

1. **The call's cgroup** (here). A fresh cgroup per call: on cgroup v2 ``cgroup.kill``
   ends every member of it *and of every descendant cgroup* in one race-free step; a pids
   controller (v2, or v1 ``/sys/fs/cgroup/pids`` on hybrid hosts) caps it at ``max_pids``.
2. **No way out of it** (``_launcher``, root hosts): read-only cgroup mounts in a private
   mount and cgroup namespace, and no ``CAP_SYS_ADMIN``/``CAP_SYS_PTRACE``/``CAP_SYS_MODULE``.
3. **The process tree** (``_launcher``, ``_process``): a subreaper launcher that freezes and
   kills every descendant, the host's kill of the launcher's tree, a sweep of the session.

Each net degrades on its own and warns once (``_warn_once``): no cgroup v2 means no
``cgroup.kill`` (members of the call's cgroups are then stopped and killed in a loop,
descendant cgroups included); no pids controller means no process cap; not root means no
namespaces, read-only mounts or capability drop, so a command that kills its launcher and
calls ``setsid`` can outlive the call. ``describe_unenforced`` lists what this host lacks.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid

from ._launcher import freeze_then_kill, mounts

__all__ = ["CallCgroup", "describe_unenforced"]

_log = logging.getLogger("tools.bash")
_warned: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        _log.warning("bash containment: %s", message)


# -- the call's cgroup (host side) ------------------------------------------------------


def _v2_root() -> str | None:
    for point, _opts, fstype, _super in mounts():
        if fstype == "cgroup2" and os.access(os.path.join(point, "cgroup.procs"), os.W_OK):
            return point
    return None


def _v1_pids_root() -> str | None:
    for point, _opts, fstype, superopts in mounts():
        if fstype == "cgroup" and "pids" in superopts.split(","):
            if os.access(os.path.join(point, "cgroup.procs"), os.W_OK):
                return point
    return None


def _has_v2_pids(root: str) -> bool:
    try:
        with open(os.path.join(root, "cgroup.subtree_control"), encoding="ascii") as f:
            return "pids" in f.read().split()
    except OSError:
        return False


_PREFIX = "codemode-bash-"
_collected: set[str] = set()


def _collect_stale(parent: str) -> None:
    """Remove empty call cgroups left by host processes that died (once per hierarchy).

    A host killed outright cannot remove its calls' cgroups; the launcher kills their
    members, so what remains is empty, and ``rmdir`` refuses anything that is not.
    """
    if parent in _collected:
        return
    _collected.add(parent)
    with contextlib.suppress(OSError):
        for name in os.listdir(parent):
            owner = name[len(_PREFIX) :].split("-", 1)[0]
            if not name.startswith(_PREFIX) or not owner.isdigit():
                continue
            if os.path.exists(f"/proc/{owner}"):
                continue
            with contextlib.suppress(OSError):
                for dirpath, _dirs, _files in os.walk(os.path.join(parent, name), topdown=False):
                    os.rmdir(dirpath)


def _make(parent: str, max_pids: int | None) -> str:
    _collect_stale(parent)
    path = os.path.join(parent, f"{_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}")
    os.mkdir(path, 0o755)
    try:
        if max_pids is not None:
            with open(os.path.join(path, "pids.max"), "w", encoding="ascii") as f:
                f.write(str(max_pids))
    except OSError:
        with contextlib.suppress(OSError):
            os.rmdir(path)
        raise
    return path


def _members(path: str) -> list[int]:
    """Members of ``path`` and of every cgroup below it."""
    pids: list[int] = []
    for dirpath, _dirs, _files in os.walk(path):
        try:
            with open(os.path.join(dirpath, "cgroup.procs"), encoding="ascii") as f:
                pids.extend(int(line) for line in f if line.strip())
        except (OSError, ValueError):
            continue
    return pids


class CallCgroup:
    """One call's cgroup(s): ``kill_path`` (v2, for ``cgroup.kill``) and ``pids_path``.

    On a pure cgroup v2 host with the pids controller both are the same directory; on a
    hybrid host the pids cap lives in the v1 hierarchy. Create with ``CallCgroup.create``.
    """

    __slots__ = ("kill_path", "pids_path")

    def __init__(self, kill_path: str | None, pids_path: str | None) -> None:
        self.kill_path = kill_path
        self.pids_path = pids_path

    @classmethod
    def create(cls, max_pids: int | None) -> CallCgroup | None:
        """Fresh cgroup(s) for one call, or ``None`` when no hierarchy is writable.

        Whatever cannot be provided (subtree kill, pids cap) is warned about once.
        """
        v2 = _v2_root()
        kill_path: str | None = None
        pids_path: str | None = None
        if v2 is not None:
            v2_pids = max_pids is not None and _has_v2_pids(v2)
            try:
                kill_path = _make(v2, max_pids if v2_pids else None)
            except OSError as exc:
                _warn_once("v2", f"cannot create a cgroup v2 group ({exc})")
            else:
                if not os.path.exists(os.path.join(kill_path, "cgroup.kill")):
                    _warn_once(
                        "kill", "no cgroup.kill (Linux < 5.14): members are killed in a loop"
                    )
                if v2_pids:
                    pids_path = kill_path
        else:
            _warn_once(
                "v2",
                "no writable cgroup v2 hierarchy: descendant cgroups are killed by a walk, "
                "not atomically",
            )
        if max_pids is not None and pids_path is None:
            v1 = _v1_pids_root()
            if v1 is not None:
                try:
                    pids_path = _make(v1, max_pids)
                except OSError as exc:
                    _warn_once("pids", f"cannot create a pids cgroup ({exc})")
            else:
                _warn_once(
                    "pids",
                    "no writable pids cgroup: a fork bomb is bounded only by the timeout",
                )
        if kill_path is None and pids_path is None:
            return None
        return cls(kill_path, pids_path)

    @property
    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files the launcher writes its pid to in order to join."""
        paths = dict.fromkeys(p for p in (self.kill_path, self.pids_path) if p is not None)
        return [os.path.join(p, "cgroup.procs") for p in paths]

    def pids(self) -> list[int]:
        """Every process in the call's cgroups and their descendants."""
        found: set[int] = set()
        for path in (self.kill_path, self.pids_path):
            if path is not None:
                found.update(_members(path))
        return sorted(found)

    def kill(self) -> None:
        """Kill every member, descendant cgroups included."""
        if self.kill_path is not None:
            try:
                with open(os.path.join(self.kill_path, "cgroup.kill"), "w", encoding="ascii") as f:
                    f.write("1")
            except OSError:
                pass
        inside = set(self.pids())
        if inside:
            freeze_then_kill(lambda table: inside.union(self.pids()) & table.keys())

    def try_remove(self) -> bool:
        """Delete the cgroups at once if they are empty; ``False`` if one is not (then
        ``remove``, which kills and retries, is what is left to do)."""
        for path in dict.fromkeys(p for p in (self.kill_path, self.pids_path) if p is not None):
            try:
                os.rmdir(path)  # fails on members or descendant cgroups: no walk needed here
            except FileNotFoundError:
                continue
            except OSError:
                return False
        return True

    def remove(self) -> None:
        """Kill what is left and delete the cgroups, deepest first (retried while draining)."""
        for path in dict.fromkeys(p for p in (self.kill_path, self.pids_path) if p is not None):
            for attempt in range(200):
                self.kill()
                try:
                    for dirpath, _dirs, _files in os.walk(path, topdown=False):
                        os.rmdir(dirpath)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.005 if attempt < 100 else 0.02)
            else:
                _log.warning("could not remove bash cgroup %s", path)


def describe_unenforced() -> list[str]:
    """What this host cannot enforce for ``bash`` (empty when every net is in place)."""
    missing = []
    if os.geteuid() != 0:
        missing.append(
            "not root: no cgroup/mount namespace, read-only cgroup mounts or capability drop"
        )
    if _v2_root() is None:
        missing.append("no writable cgroup v2 hierarchy: no atomic subtree kill")
    v2 = _v2_root()
    if (v2 is None or not _has_v2_pids(v2)) and _v1_pids_root() is None:
        missing.append("no writable pids controller: no process cap")
    return missing
