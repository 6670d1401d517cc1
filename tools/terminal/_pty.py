"""The PTY session core shared by the terminal tools and the persistent ``bash``.

A ``PtySession`` is one program (a shell or a REPL) on a fresh pseudo-terminal, spawned
behind the containment launcher of ``tools/shell`` (``BashProcess`` with ``tty=``): the
launcher leads the terminal's session, holds it as controlling terminal, joins a cgroup of
its own and is the tree's subreaper, so killing the session kills everything it started,
and the host's ``kill_all_processes`` reaches it like any bash call.

The host keeps both ends of the terminal: it reads the master side into a bounded
scrollback (oldest text dropped first, whole lines counted) and keeps the slave side open
to ask the line discipline how much typed input is still unread (``FIONREAD``). That, with
``/proc`` (the foreground process group's members and the system call each is blocked in,
including the descriptor sets of ``select``/``poll``), tells "the program waits for input
on this terminal" (``stdin_read``) apart from mere output silence (``inferred_idle``).
"""

from __future__ import annotations

import codecs
import contextlib
import fcntl
import os
import re
import signal as signal_mod
import struct
import termios
from collections.abc import Mapping, Sequence
from typing import Literal

import anyio
import anyio.abc

from .._errors import TerminalError
from ..shell._process import BashProcess, signal_name

__all__ = ["PtySession", "WaitReason", "clean_terminal_text"]

WaitReason = Literal["stdin_read", "inferred_idle", "timeout", "session_exit"]

# How often a wait re-checks /proc when no output arrives. Detection needs two agreeing
# looks in a row, so input the line discipline has not yet handed over is never mistaken
# for a program blocked on an empty terminal.
_TICK_S = 0.04
_STABLE_LOOKS = 2
# The first looks after output come sooner (5, 10, 20 ms, then every tick): a shell back at
# its prompt is seen in ~15 ms instead of two full ticks. Each look reads the process's
# actual system call, so an early look cannot mistake a busy program for a reading one.
_FIRST_TICK_S = 0.005

# System call numbers by machine: (reads, selects, polls), for /proc/<pid>/syscall.
_SYSCALLS: dict[str, tuple[frozenset[int], frozenset[int], frozenset[int]]] = {
    "x86_64": (frozenset({0, 17, 19, 295}), frozenset({23, 270}), frozenset({7, 271})),
    "aarch64": (frozenset({63, 65, 67, 69}), frozenset({72}), frozenset({73})),
}
_READS, _SELECTS, _POLLS = _SYSCALLS.get(
    os.uname().machine, (frozenset(), frozenset(), frozenset())
)
_POLLIN = 0x1
_MAX_FDS = 1024

# ANSI/VT escape sequences: CSI, OSC (BEL or ST terminated), other two-byte escapes.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[PX^_][^\x1b]*\x1b\\|\x1b[@-Z\\-_]"
    r"|\x1b[()][0-9A-Za-z]|[\x00-\x07\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]"
)


def _overlay(line: str) -> str:
    """What a terminal shows for one line with carriage returns and backspaces in it."""
    if "\r" not in line and "\b" not in line:
        return line
    cells: list[str] = []
    pos = 0
    for ch in line:
        if ch == "\r":
            pos = 0
        elif ch == "\b":
            pos = max(0, pos - 1)
        else:
            if pos < len(cells):
                cells[pos] = ch
            else:
                cells.append(ch)
            pos += 1
    return "".join(cells)


def clean_terminal_text(raw: str) -> str:
    """Terminal output as plain text: escapes removed, CRLF as LF, CR/BS overlaid."""
    text = raw.replace("\r\n", "\n")
    text = _ESCAPES.sub("", text)
    if "\r" in text or "\b" in text:
        text = "\n".join(_overlay(line) for line in text.split("\n"))
    return text


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # state ppid pgrp session tty_nr ... (after the command name's last ")")
    return raw[raw.rfind(b")") + 2 :].decode("ascii", "replace").split()


def _read_mem(pid: int, address: int, size: int) -> bytes | None:
    try:
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as f:
            f.seek(address)
            data = f.read(size)
    except (OSError, OverflowError, ValueError):
        return None
    return data if len(data) == size else None


class PtySession:
    """One program on its own pseudo-terminal, behind the containment launcher.

    Create, then ``await start(group)`` with a long-lived task group (the owning manager's),
    which runs the reader and exit watcher. ``write`` types input, ``wait_quiet`` waits for
    one of the ``WaitReason``s, ``text_since`` / ``lines`` read the scrollback, ``kill``
    ends the whole tree and ``finished`` is set once everything is reaped.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        rows: int = 50,
        cols: int = 200,
        scrollback_chars: int = 2_000_000,
    ) -> None:
        self.argv = list(argv)
        self.cwd = cwd
        self.env = dict(env)
        self.rows = rows
        self.cols = cols
        self.scrollback_chars = scrollback_chars
        self.raw = ""
        # Absolute positions: characters and lines dropped from the front of ``raw``.
        self.dropped_chars = 0
        self.dropped_lines = 0
        self.pid: int | None = None
        self.launcher_pid: int | None = None
        self.returncode: int | None = None
        self.exited = anyio.Event()
        self.finished = anyio.Event()
        self._changed = anyio.Event()
        self._master = -1
        self._slave = -1
        self._tty_path = ""
        self._proc: BashProcess | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._write_lock = anyio.Lock()

    # -- life cycle ----------------------------------------------------------------------

    async def start(self, group: anyio.abc.TaskGroup) -> None:
        """Spawn the program; ``TerminalError`` ``TERMINAL_SPAWN_FAILED`` when that fails."""
        master, slave = os.openpty()
        try:
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", self.rows, self.cols, 0, 0))
            os.set_blocking(master, False)
            self._tty_path = os.ttyname(slave)
            proc = BashProcess(
                "",
                cwd=self.cwd,
                env=self.env,
                on_stdout=_ignore,
                on_stderr=_ignore,
                exec_argv=self.argv,
                tty=slave,
            )
            await proc.start()
        except Exception as exc:
            os.close(master)
            os.close(slave)
            raise TerminalError(
                f"terminal could not be started: {exc}", "TERMINAL_SPAWN_FAILED"
            ) from exc
        self._master, self._slave, self._proc = master, slave, proc
        assert proc.process is not None
        self.launcher_pid = proc.process.pid
        self.pid = _first_child(self.launcher_pid)
        group.start_soon(self._run, name=f"pty {self.argv[0]}")

    async def _run(self) -> None:
        proc = self._proc
        assert proc is not None
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._read_loop)
                self.returncode = await proc.wait()
                # The tree is gone (the launcher killed it before exiting): what it wrote
                # is in the master's buffer; take it before the reader stops.
                self._drain()
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                if self.returncode is None and proc.process is not None:
                    self.returncode = proc.process.returncode
                await proc.close()
                if self.returncode is None and proc.process is not None:
                    self.returncode = proc.process.returncode
                self.exited.set()
                self._notify()
                for fd in (self._master, self._slave):
                    with contextlib.suppress(OSError):
                        os.close(fd)
                self.finished.set()

    def kill(self) -> None:
        """Kill the whole tree now (synchronous; ``finished`` follows once reaped)."""
        if self._proc is not None and not self.exited.is_set():
            self._proc.kill_now()

    async def close(self) -> None:
        """Kill the tree and wait until it is reaped (shielded)."""
        with anyio.CancelScope(shield=True):
            self.kill()
            await self.finished.wait()

    @property
    def status(self) -> dict[str, object]:
        """``{kind: 'running'}`` or ``{kind: 'exited', exitCode, signal}``."""
        if not self.exited.is_set():
            return {"kind": "running"}
        code = self.returncode
        sig = signal_name(code)
        return {"kind": "exited", "exitCode": None if sig is not None else code, "signal": sig}

    # -- output --------------------------------------------------------------------------

    def _notify(self) -> None:
        event, self._changed = self._changed, anyio.Event()
        event.set()

    def _append(self, data: bytes, final: bool = False) -> None:
        text = self._decoder.decode(data, final)
        if not text:
            return
        self.raw += text
        excess = len(self.raw) - self.scrollback_chars
        if excess > 0:
            # Drop whole lines where possible, so retained line numbers stay exact.
            cut = self.raw.find("\n", excess)
            cut = excess if cut < 0 else cut + 1
            self.dropped_lines += self.raw.count("\n", 0, cut)
            self.dropped_chars += cut
            self.raw = self.raw[cut:]
        self._notify()

    @property
    def end(self) -> int:
        """The absolute position just after the newest output character."""
        return self.dropped_chars + len(self.raw)

    def text_since(self, position: int) -> tuple[str, bool]:
        """Raw output after absolute ``position``, and whether some of it was dropped."""
        lost = position < self.dropped_chars
        return self.raw[max(0, position - self.dropped_chars) :], lost

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self._master, 65536)
            except (BlockingIOError, OSError):
                break
            if not data:
                break
            self._append(data)
        self._append(b"", final=True)

    async def _read_loop(self) -> None:
        while True:
            await anyio.wait_readable(self._master)
            try:
                data = os.read(self._master, 65536)
            except BlockingIOError:
                continue
            except OSError:
                return
            if not data:
                return
            self._append(data)

    async def changed(self) -> None:
        """Wait for new output or the program's exit."""
        if self.exited.is_set():
            return
        await self._changed.wait()

    # -- input ---------------------------------------------------------------------------

    async def write(self, data: bytes) -> None:
        """Type ``data`` into the terminal (waits while the terminal's input queue is full)."""
        async with self._write_lock:
            view = memoryview(data)
            while view:
                if self.exited.is_set():
                    raise TerminalError("terminal session has exited", "TERMINAL_EXITED")
                try:
                    written = os.write(self._master, view)
                except BlockingIOError:
                    with anyio.move_on_after(_TICK_S):
                        await anyio.wait_writable(self._master)
                    continue
                except OSError as exc:
                    raise TerminalError(
                        f"cannot write to the terminal: {exc.strerror or exc}", "TERMINAL_EXITED"
                    ) from exc
                view = view[written:]

    # -- waiting ---------------------------------------------------------------------------

    def foreground_pgid(self) -> int | None:
        """The terminal's foreground process group, if it has one."""
        try:
            pgid = os.tcgetpgrp(self._master)
        except OSError:
            return None
        return pgid if pgid > 0 else None

    def in_session(self, pgid: int) -> bool:
        """Whether process group ``pgid`` has a live member in this terminal's session."""
        return bool(self._members(pgid))

    def _members(self, pgid: int) -> list[int]:
        sid = self.launcher_pid
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            fields = _stat(int(name))
            if fields is None or len(fields) < 4 or fields[0] in ("Z", "X"):
                continue
            if int(fields[2]) == pgid and int(fields[3]) == sid:
                found.append(int(name))
        return found

    def _queued(self, fd: int) -> int:
        try:
            raw = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
        except OSError:
            return 0
        return int(struct.unpack("i", raw)[0])

    def look(self) -> Literal["reading", "busy", "other"]:
        """``reading`` when a foreground process sleeps reading this terminal with nothing
        unread (no output waiting for the host, no typed input waiting for the program);
        ``busy`` when one is running (on a CPU or in uninterruptible I/O, as a program
        starting up is), which is not silence; else ``other``."""
        if self.exited.is_set():
            return "other"
        pgid = self.foreground_pgid()
        if pgid is None:
            return "other"
        members = self._members(pgid)
        states = [(_stat(pid) or ["X"])[0] for pid in members]
        if any(state in ("R", "D") for state in states):
            return "busy"
        if self._queued(self._master) or self._queued(self._slave):
            return "other"
        return "reading" if any(self._reads_tty(pid) for pid in members) else "other"

    def _is_tty(self, pid: int, fd: int) -> bool:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            return False
        # /dev/tty is the caller's controlling terminal: ours, for a member of our session.
        return target in (self._tty_path, "/dev/tty")

    def _reads_tty(self, pid: int) -> bool:
        fields = _stat(pid)
        if fields is None or fields[0] != "S":
            return False
        try:
            with open(f"/proc/{pid}/syscall", encoding="ascii") as f:
                parts = f.read().split()
            number = int(parts[0])
            args = [int(a, 16) for a in parts[1:7]]
        except (OSError, ValueError, IndexError):
            return False
        if number in _READS:
            return self._is_tty(pid, args[0])
        if number in _SELECTS:
            nfds = min(args[0], _MAX_FDS)
            bitmap = _read_mem(pid, args[1], (nfds + 7) // 8) if args[1] else None
            if bitmap is None:
                return False
            fds = (fd for fd in range(nfds) if bitmap[fd // 8] >> (fd % 8) & 1)
            return any(self._is_tty(pid, fd) for fd in fds)
        if number in _POLLS:
            nfds = min(args[1], _MAX_FDS)
            table = _read_mem(pid, args[0], 8 * nfds) if nfds else None
            if table is None:
                return False
            for i in range(nfds):
                fd, events, _revents = struct.unpack_from("ihh", table, 8 * i)
                if fd >= 0 and events & _POLLIN and self._is_tty(pid, fd):
                    return True
        return False

    async def wait_quiet(self, *, idle_s: float, timeout_s: float) -> WaitReason:
        """Wait until the program reads the terminal, falls silent, exits or time runs out.

        Silence counts from the newest output or the last look that found a foreground
        process running: a program busy computing or starting up is not idle.
        """
        clock = anyio.current_time
        now = clock()
        deadline = now + timeout_s
        last_output = now
        seen = self.end
        stable = 0
        quiet = 0
        while True:
            if self.exited.is_set():
                return "session_exit"
            if now >= deadline:
                return "timeout"
            if now >= last_output + idle_s:
                return "inferred_idle"
            tick = min(_TICK_S, _FIRST_TICK_S * 2**quiet)
            quiet = min(quiet + 1, 8)  # bounded: 2**quiet stays a small float
            with anyio.move_on_after(min(tick, deadline - now, last_output + idle_s - now)):
                await self.changed()
            now = clock()
            if self.end != seen:
                seen, last_output, stable, quiet = self.end, now, 0, 0
                continue
            if self.exited.is_set():
                continue
            state = self.look()
            if state == "busy":
                last_output, stable = now, 0
                continue
            stable = stable + 1 if state == "reading" else 0
            if stable >= _STABLE_LOOKS:
                return "stdin_read"

    def signal_foreground(self, sig: signal_mod.Signals) -> int:
        """Send ``sig`` to the foreground process group; returns its id."""
        pgid = self.foreground_pgid()
        if pgid is None or not self.in_session(pgid):
            raise TerminalError(
                "the terminal has no foreground process group", "TERMINAL_NO_FOREGROUND"
            )
        try:
            os.killpg(pgid, sig)
        except OSError as exc:
            raise TerminalError(
                f"cannot signal process group {pgid}: {exc.strerror or exc}",
                "TERMINAL_SIGNAL_FAILED",
            ) from exc
        return pgid

    def is_shell_group(self, pgid: int) -> bool:
        """Whether ``pgid`` holds the session's main program or its launcher."""
        if pgid in (self.pid, self.launcher_pid):
            return True
        if self.pid is not None:
            fields = _stat(self.pid)
            return fields is not None and len(fields) > 2 and int(fields[2]) == pgid
        return False


def _ignore(_data: bytes) -> None:
    return None


def _first_child(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as f:
            children = f.read().split()
    except OSError:
        return None
    return int(children[0]) if children else None
