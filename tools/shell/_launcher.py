"""The launcher between the host and ``bash``, and the freeze-then-kill of process sets.

``_process`` runs ``launch`` in a fresh ``python -I -S`` for every bash call, started ahead
of the call where it can (a spare, which then waits for its call on a pipe), so this module
imports as little as possible: interpreter start-up is on a cold call's path.
Once its call arrived, the launcher

- joins the call's cgroups (``_cgroup.CallCgroup.procs_files``), then on root hosts enters
  its own mount and cgroup namespaces, remounts every cgroup hierarchy, ``/sys`` and
  ``/proc/sys`` read-only and drops ``CAP_SYS_ADMIN``, ``CAP_SYS_PTRACE`` and
  ``CAP_SYS_MODULE`` from every capability set. Without those a root command can neither
  move itself to another cgroup (the files are read-only and it cannot remount, mount a
  fresh hierarchy, ``setns`` into the host's namespaces, or reach the host's mounts through
  ``/proc/<host pid>/root``) nor have the kernel start a process for it outside the call
  (``core_pattern``, ``uevent_helper`` and v1 ``release_agent`` are read-only);
- is a child subreaper, so orphans (``nohup``, ``setsid``, double forks, ``disown``) stay
  below it instead of moving to init; when bash exits it stops every descendant (a stopped
  process cannot fork), kills them all, and exits the way bash did;
- dies with its tree when the host process dies (``PR_SET_PDEATHSIG``; strictly, when the
  host thread that spawned it exits: the event loop's), so even a host killed outright
  leaves nothing behind.

``kill_tree`` and ``kill_session`` are also the host's nets (``_process``).
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
from collections.abc import Callable

__all__ = [
    "freeze_then_kill",
    "kill_session",
    "kill_tree",
    "encode_request",
    "launch",
    "mounts",
    "process_start_time",
]


def _send(pid: int, sig: int) -> None:
    # Not contextlib.suppress: importing contextlib would add to every call's start-up.
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


# -- process sets ------------------------------------------------------------------

# (ppid, session, start time in clock ticks) of every live, non-zombie process.
_Table = dict[int, tuple[int, int, int]]


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # The command name may contain spaces and parentheses; everything after the last ")"
    # is numeric: state ppid pgrp session ... starttime (field 22).
    return raw[raw.rfind(b")") + 2 :].decode("ascii", "replace").split()


def process_start_time(pid: int) -> int | None:
    """The start time of ``pid`` (clock ticks since boot): with the pid, its identity."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields is not None and len(fields) > 19 else None


def _table() -> _Table:
    table: _Table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _stat_fields(int(name))
        if fields is None or len(fields) < 20 or fields[0] in ("Z", "X"):
            continue
        table[int(name)] = (int(fields[1]), int(fields[3]), int(fields[19]))
    return table


def freeze_then_kill(select: Callable[[_Table], set[int]]) -> None:
    """SIGSTOP what ``select`` picks until a fresh look finds nothing new, then SIGKILL it.

    A stopped process cannot fork, so repeating the selection converges even against a
    fork loop. A pid is killed only if the final table still selects it with the start
    time it had when it was stopped: a pid that was reused meanwhile is let go (SIGCONT).
    """
    stopped: dict[int, int] = {}
    for _ in range(200):
        table = _table()
        fresh = {pid for pid in select(table) if stopped.get(pid) != table[pid][2]}
        if not fresh:
            break
        for pid in fresh:
            _send(pid, signal.SIGSTOP)
            stopped[pid] = table[pid][2]
    final = _table()
    chosen = select(final)
    for pid, start in stopped.items():
        entry = final.get(pid)
        if entry is None or entry[2] != start:
            continue
        sig = signal.SIGKILL if pid in chosen else signal.SIGCONT
        _send(pid, sig)


def _descendants(table: _Table, root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _sid, _start) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def kill_tree(root: int, root_start: int | None, *, include_root: bool) -> None:
    """Freeze and kill every descendant of ``root`` (and ``root`` itself if asked).

    ``root_start`` (its ``process_start_time``) guards against a reused pid: if ``root``
    is no longer that process, nothing is touched.
    """

    def select(table: _Table) -> set[int]:
        entry = table.get(root)
        if entry is None or (root_start is not None and entry[2] != root_start):
            return set()
        found = _descendants(table, root)
        if include_root:
            found.add(root)
        return found

    freeze_then_kill(select)


def kill_session(sid: int, not_before: int) -> None:
    """Freeze and kill every process of session ``sid`` started at or after ``not_before``.

    The launcher leads the call's session, so this reaches processes that were orphaned to
    init when the launcher itself was killed, unless they also left the session.
    """
    me = os.getpid()

    def select(table: _Table) -> set[int]:
        return {
            pid
            for pid, (_ppid, session, start) in table.items()
            if session == sid and start >= not_before and pid != me
        }

    freeze_then_kill(select)


# -- the launcher ----------------------------------------------------------------------


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as octal (\040 ...).
    return field.encode().decode("unicode_escape") if "\\" in field else field


def mounts() -> list[tuple[str, str, str, str]]:
    """``(mount point, per-mount options, fs type, super options)`` from mountinfo."""
    out = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields, tail = left.split(), right.split()
                if len(fields) >= 6 and len(tail) >= 3:
                    out.append((_unescape(fields[4]), fields[5], tail[0], tail[2]))
    except OSError:
        pass
    return out


_CLONE_NEWNS = 0x00020000
_CLONE_NEWCGROUP = 0x02000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_NOATIME, _MS_NODIRATIME, _MS_BIND = 32, 1024, 2048, 4096
_MS_REC, _MS_PRIVATE, _MS_RELATIME, _MS_STRICTATIME = 16384, 1 << 18, 1 << 21, 1 << 24
_MOUNT_FLAGS = {
    "nosuid": _MS_NOSUID,
    "nodev": _MS_NODEV,
    "noexec": _MS_NOEXEC,
    "noatime": _MS_NOATIME,
    "nodiratime": _MS_NODIRATIME,
    "relatime": _MS_RELATIME,
    "strictatime": _MS_STRICTATIME,
}
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_CHILD_SUBREAPER = 1, 4, 24, 36
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
# CAP_SYS_MODULE, CAP_SYS_PTRACE, CAP_SYS_ADMIN: loading code into the kernel, reaching
# host processes (and their mounts through /proc/<pid>/root), mounts and setns.
_DROPPED_CAPS = (16, 19, 21)
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _Stop(Exception):
    """Raised in the launcher by SIGUSR1 (the host died): kill everything now."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _read_only(libc: ctypes.CDLL) -> None:
    """Remount every cgroup hierarchy, ``/sys`` and ``/proc/sys`` read-only (this ns only)."""
    _check(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "make mounts private")
    # /proc/sys is not a mount of its own: bind it onto itself so it can be remounted.
    _check(libc.mount(b"/proc/sys", b"/proc/sys", None, _MS_BIND | _MS_REC, None), "bind /proc/sys")
    for point, opts, fstype, _super in mounts():
        inside = any(point == top or point.startswith(top + "/") for top in ("/sys", "/proc/sys"))
        if not inside and fstype not in ("cgroup", "cgroup2"):
            continue
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY
        for opt in opts.split(","):
            flags |= _MOUNT_FLAGS.get(opt, 0)
        _check(libc.mount(None, point.encode(), None, flags, None), f"remount {point} read-only")


def _drop_caps(libc: ctypes.CDLL) -> None:
    for cap in _DROPPED_CAPS:
        _check(libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0), "drop from the bounding set")
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two {effective, permitted, inheritable} words
    _check(libc.capget(header, data), "capget")
    for cap in _DROPPED_CAPS:
        word, bit = divmod(cap, 32)
        for offset in range(3):
            data[word * 3 + offset] &= ~(1 << bit) & 0xFFFFFFFF
    _check(libc.capset(header, data), "capset")


def _isolate() -> list[str]:
    """Namespaces, read-only mounts, capability drop; returns what failed (empty: all held)."""
    libc = _libc()
    failed = []
    try:
        # The cgroup namespace is rooted at the cgroups just joined, so a fresh cgroupfs
        # mount (e.g. from a user namespace) shows only the call's own subtree.
        _check(libc.unshare(_CLONE_NEWNS | _CLONE_NEWCGROUP), "unshare mount and cgroup ns")
        _read_only(libc)
    except OSError as exc:
        failed.append(str(exc.strerror or exc))
    try:
        _drop_caps(libc)  # last: the remounts above need CAP_SYS_ADMIN
    except OSError as exc:
        failed.append(str(exc.strerror or exc))
    return failed


def _mirror(status: int) -> None:
    """Exit the way bash did (same code, or the same fatal signal)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL and SIGSTOP cannot be caught
            pass
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


def _read_exactly(fd: int, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def read_request(fd: int) -> list[bytes] | None:
    """The call the host sends on ``fd``: a 16-digit length, then NUL-separated fields.

    ``None`` when the host went away before sending all of it (or sent garbage).
    """
    header = _read_exactly(fd, 16)
    if len(header) != 16 or not header.isdigit():
        return None
    body = _read_exactly(fd, int(header))
    if len(body) != int(header):
        return None
    return body.split(b"\0")


def encode_request(fields: list[bytes]) -> bytes:
    """The bytes ``read_request`` decodes (no field may contain a NUL)."""
    body = b"\0".join(fields)
    return b"%016d" % len(body) + body


def launch(argv: list[str]) -> None:
    """Run as ``launch([CTL_FD, STATUS_FD, HOST_PID, ISOLATE, FSIZE, *PROCS])``.

    First the launcher contains itself: limits, the call's cgroups (``PROCS``), isolation
    (``ISOLATE``: root hosts), subreaper. Then it waits for its call on CTL_FD, so that a
    spare (``_process``) does all of this before the call comes. The call
    (``encode_request``) is ``[CWD, MODE, N, *ARGV, *ENV]``: ``MODE`` ``--`` runs ``bash -c
    ARGV[0]``; ``--exec`` runs ``ARGV`` (a terminal's shell or REPL) with the launcher's
    standard input, a terminal, as the session's controlling terminal (the launcher leads
    the session, so the whole terminal tree stays in it and below it). ``ENV``
    (``NAME=value`` items) is the program's whole environment: the launcher's own is not
    passed on. A waiting launcher runs nothing: it dies with the host, by the default
    action of its parent-death signal, or at the end of the pipe.

    Writes one line to STATUS_FD right before bash is started (``ok``, ``ok degraded: why``
    or ``error: why``; an ``error`` line also as soon as containing itself fails), waits
    for bash (a bash that cannot be started exits 127),
    kills whatever bash left behind, writes ``done`` (the host's sign that this cleanup
    ran) and exits as bash did.
    """
    ctl_fd, status_fd, host_pid, isolate, fsize = (int(a) for a in argv[:5])
    procs = argv[5:]
    libc = _libc()
    # A host that ignores or blocks the signal must not hand that on to a waiting spare.
    signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
    # The host's exit (even SIGKILL) must not orphan the call: SIGUSR1 arrives. While the
    # launcher waits for its call, the signal's default action ends it; once a call came,
    # the signal is blocked and later handled (stop and kill everything).
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGUSR1, 0, 0, 0)
    if os.getppid() != host_pid:
        os._exit(126)
    # Not dumpable: a command (of this call or of another) may have this process's uid and,
    # once the capabilities below are dropped, no fewer capabilities, which would let it
    # ptrace a launcher or open its pipes through /proc/<pid>/fd (a waiting spare's call
    # pipe among them) and start processes outside its own call. bash, an exec away, is
    # dumpable again.
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    report = os.fdopen(status_fd, "w", encoding="utf-8")
    note = ""
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        for path in procs:
            with open(path, "wb") as f:
                f.write(b"%d" % os.getpid())
        if isolate and (failed := _isolate()):
            note = " degraded: " + "; ".join(failed)
        _check(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "become a subreaper")
    except OSError as exc:
        report.write(f"error: {exc.strerror or exc}\n")
        report.close()
        os._exit(126)
    fields = read_request(ctl_fd)
    signal.pthread_sigmask(signal.SIG_BLOCK, {*_FORWARDED, signal.SIGUSR1})
    if fields is None or os.getppid() != host_pid:
        os._exit(126)
    os.close(ctl_fd)
    cwd = fields[0]
    tty = fields[1] == b"--exec"
    count = int(fields[2])
    program = fields[3 : 3 + count] if tty else [b"bash", b"-c", fields[3]]
    env: dict[bytes, bytes] = {}
    for item in fields[3 + count :]:
        name, sep, value = item.partition(b"=")
        if sep:
            env[name] = value
    try:
        os.chdir(cwd)
        if tty:
            # Imported only here: the one-shot bash path stays as small as it was.
            import fcntl
            import termios

            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    except OSError as exc:
        report.write(f"error: {exc.strerror or exc}\n")
        report.close()
        os._exit(126)
    # posix_spawn (vfork and exec in C), not os.fork: copying this interpreter and running
    # Python in the child cost more than bash itself. Python ignores SIGPIPE and SIGXFSZ;
    # bash must see the defaults (and "File size limit exceeded" must kill); the status
    # pipe is close-on-exec. The search for the program uses the call's PATH.
    os.set_inheritable(status_fd, False)
    search = env.get(b"PATH")
    if search is None:
        os.unsetenv(b"PATH")
    else:
        os.putenv(b"PATH", search)
    # A one-shot call's "ok" comes before the spawn: its command may kill this launcher at
    # once (``kill -9 $PPID``), and a launcher that ends without a word never started
    # anything, so the host may hand the call to another launcher. A terminal's comes
    # after: the host then looks up the program's pid (a terminal never takes a spare).
    if not tty:
        report.write(f"ok{note}\n")
        report.flush()
    child = 0
    try:
        child = os.posix_spawnp(
            program[0],
            program,
            env,
            setsigmask=(),
            setsigdef=(*_FORWARDED, signal.SIGUSR1, signal.SIGPIPE, signal.SIGXFSZ),
        )
    except OSError as exc:
        os.write(2, program[0] + f": {exc.strerror}\n".encode())
    if tty:
        report.write(f"ok{note}\n")
        report.flush()

    def stop(_sig: int, _frame: object) -> None:
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        raise _Stop

    # Signals for the process group are bash's business; the launcher outlives them so it
    # can clean up after bash.
    for sig in _FORWARDED:
        signal.signal(sig, signal.SIG_IGN)
    if tty:
        # A terminal program without job control (a REPL) shares the launcher's process
        # group, the terminal's foreground group: a stop signal meant for the program must
        # not stop the launcher, or nothing would reap and clean up after it.
        for sig in (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU):
            signal.signal(sig, signal.SIG_IGN)
    signal.signal(signal.SIGUSR1, stop)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)  # so the output pipes close when bash's processes are gone
    os.close(null)
    # A program that could not be started exits 127, as a shell's would.
    status: int | None = None if child else 127 << 8
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
        while status is None:
            pid, st = os.waitpid(-1, 0)
            if pid == child:
                status = st
    except (_Stop, ChildProcessError):
        pass
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    try:
        # Every descendant stays below this subreaper, so with no child left there is
        # nothing to kill (the common case, which then costs no /proc scan).
        while (ready := os.waitpid(-1, os.WNOHANG))[0] != 0:
            if ready[0] == child and status is None:
                status = ready[1]
        kill_tree(os.getpid(), None, include_root=False)
        while True:
            pid, st = os.waitpid(-1, 0)
            if pid == child and status is None:
                status = st
    except ChildProcessError:
        pass
    report.write("done\n")
    report.close()
    # Never reaped bash (it cannot happen short of a kernel surprise): report a SIGKILL,
    # whose wait status is the bare signal number.
    _mirror(status if status is not None else signal.SIGKILL)
