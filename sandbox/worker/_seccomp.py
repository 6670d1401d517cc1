"""A hand-built seccomp-BPF filter for worker processes (x86_64 and aarch64).

Deny-list policy: everything a Python interpreter needs keeps working; what a program
that slipped past the guest's guards would use to leave the process is refused.

- process creation: ``fork``/``vfork``/``execve``/``execveat``; ``clone`` unless it makes a
  thread (``CLONE_THREAD`` set, no namespace flags); ``clone3`` answers ``ENOSYS`` (its
  flags live in memory BPF cannot read), so libc falls back to the checked ``clone``;
- new sockets: ``socket``/``socketpair``/``connect``/``bind``/``listen``/``accept*``
  (the bridge socket is inherited, so the worker never needs a new one);
- introspection of other processes: ``ptrace``, ``process_vm_*``, ``kcmp``,
  ``perf_event_open``, ``pidfd_*``, signals to any process but itself;
- mounts and namespaces, module loading, kexec, reboot, swap, bpf, keyrings, io_uring
  (it can perform I/O the filter never sees), clock and hostname changes;
- raising limits or changing credentials: ``setrlimit``, ``prlimit64`` with a new limit,
  ``set*id``, ``setgroups``, ``prctl``;
- filesystem writes: ``open``/``openat`` with a write, create, truncate or append flag,
  ``openat2``, ``creat``, unlink/rename/mkdir/rmdir/chmod/chown/link/symlink/mknod/truncate.

A foreign architecture (including the x32 ABI on x86_64) kills the process. Denied calls
fail with ``EPERM`` so a confused program gets a clear ``PermissionError``.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import platform
import struct
from typing import Any

__all__ = [
    "SeccompUnavailable",
    "build_filter",
    "install_filter",
    "packed_filter",
    "prepare",
    "worker_filter",
]


class SeccompUnavailable(RuntimeError):
    """The kernel or architecture does not allow installing the filter."""


# BPF opcodes and seccomp constants (linux/filter.h, linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000
_OFF_NR = 0
_OFF_ARCH = 4
_X32_SYSCALL_BIT = 0x40000000

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2

_CLONE_THREAD = 0x00010000
# CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
_CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000
_CLONE_NAMESPACES |= 0x20000000 | 0x40000000
# O_WRONLY|O_RDWR|O_CREAT|O_TRUNC|O_APPEND|__O_TMPFILE (same values on both arches)
_OPEN_WRITE_FLAGS = 0x1 | 0x2 | 0x40 | 0x200 | 0x400 | 0x400000

# Syscall numbers: x86_64 from asm/unistd_64.h, aarch64 from asm-generic/unistd.h.
# ``None`` marks a syscall the architecture does not have.
_ARCHES: dict[str, tuple[int, bool, dict[str, int | None]]] = {}

_TABLE = """
fork 57 -
vfork 58 -
execve 59 221
execveat 322 281
clone 56 220
clone3 435 435
socket 41 198
socketpair 53 199
connect 42 203
bind 49 200
listen 50 201
accept 43 202
accept4 288 242
ptrace 101 117
process_vm_readv 310 270
process_vm_writev 311 271
kcmp 312 272
perf_event_open 298 241
pidfd_open 434 434
pidfd_send_signal 424 424
pidfd_getfd 438 438
kill 62 129
tkill 200 130
tgkill 234 131
rt_sigqueueinfo 129 138
rt_tgsigqueueinfo 297 240
mount 165 40
umount2 166 39
pivot_root 155 41
chroot 161 51
unshare 272 97
setns 308 268
mount_setattr 442 442
move_mount 429 429
open_tree 428 428
fsopen 430 430
fsmount 432 432
fspick 433 433
kexec_load 246 104
kexec_file_load 320 294
init_module 175 105
finit_module 313 273
delete_module 176 106
reboot 169 142
swapon 167 224
swapoff 168 225
acct 163 89
bpf 321 280
userfaultfd 323 282
keyctl 250 219
add_key 248 217
request_key 249 218
io_uring_setup 425 425
io_uring_enter 426 426
io_uring_register 427 427
open_by_handle_at 304 265
name_to_handle_at 303 264
lookup_dcookie 212 18
vhangup 153 58
syslog 103 116
settimeofday 164 170
clock_settime 227 112
adjtimex 159 171
sethostname 170 161
setdomainname 171 162
quotactl 179 60
fanotify_init 300 262
iopl 172 -
ioperm 173 -
personality 135 92
setrlimit 160 164
prlimit64 302 261
setuid 105 146
setgid 106 144
setreuid 113 145
setregid 114 143
setresuid 117 147
setresgid 119 149
setgroups 116 159
prctl 157 167
open 2 -
openat 257 56
openat2 437 437
creat 85 -
unlink 87 -
unlinkat 263 35
rename 82 -
renameat 264 38
renameat2 316 276
mkdir 83 -
mkdirat 258 34
rmdir 84 -
chmod 90 -
fchmod 91 52
fchmodat 268 53
chown 92 -
fchown 93 55
lchown 94 -
fchownat 260 54
link 86 -
linkat 265 37
symlink 88 -
symlinkat 266 36
truncate 76 45
mknod 133 -
mknodat 259 33
"""


def _load_table() -> None:
    x86: dict[str, int | None] = {}
    arm: dict[str, int | None] = {}
    for line in _TABLE.strip().splitlines():
        name, a, b = line.split()
        x86[name] = None if a == "-" else int(a)
        arm[name] = None if b == "-" else int(b)
    _ARCHES["x86_64"] = (0xC000003E, True, x86)
    _ARCHES["aarch64"] = (0xC00000B7, False, arm)


_load_table()

# Syscalls refused outright (the ones with argument checks are handled separately).
_DENY = [
    "fork", "vfork", "execve", "execveat",
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "perf_event_open",
    "pidfd_open", "pidfd_send_signal", "pidfd_getfd", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "mount_setattr",
    "move_mount", "open_tree", "fsopen", "fsmount", "fspick",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "acct", "bpf", "userfaultfd", "keyctl", "add_key",
    "request_key", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "open_by_handle_at", "name_to_handle_at", "lookup_dcookie", "vhangup", "syslog",
    "settimeofday", "clock_settime", "adjtimex", "sethostname", "setdomainname",
    "quotactl", "fanotify_init", "iopl", "ioperm", "personality",
    "setrlimit", "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid",
    "setgroups", "prctl",
    "creat", "unlink", "unlinkat", "rename", "renameat", "renameat2", "mkdir", "mkdirat",
    "rmdir", "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat",
    "link", "linkat", "symlink", "symlinkat", "truncate", "mknod", "mknodat",
]  # fmt: skip
_ENOSYS = ["clone3", "openat2"]


def _stmt(code: int, k: int) -> tuple[int, int, int, int]:
    return (code, 0, 0, k)


def _jump(code: int, k: int, jt: int, jf: int) -> tuple[int, int, int, int]:
    return (code, jt, jf, k)


def _arg_lo(index: int) -> int:
    return 16 + 8 * index


def _arg_hi(index: int) -> int:
    return 16 + 8 * index + 4


# What the fork server itself must still do under its own filter, which every worker
# inherits: fork (a ``clone`` without ``CLONE_THREAD``), a worker's set-up before its own
# filter (the event loop's self-pipe, its limits, its parent-death signal and filter:
# ``socketpair``, ``setrlimit``/``prlimit64``, ``prctl``) and killing its workers at
# shutdown. ``worker_filter`` refuses exactly these again.
_SERVER_ALLOWED = frozenset({"socketpair", "setrlimit", "prctl"})


def build_filter(
    pid: int, machine: str | None = None, *, server: bool = False
) -> list[tuple[int, int, int, int]]:
    """The BPF program (list of ``(code, jt, jf, k)``) for a worker whose pid is ``pid``.

    ``pid`` is the only process the worker may signal. With ``server``, the fork
    server's variant: the same program less ``_SERVER_ALLOWED``, ``fork`` through
    ``clone``, ``prlimit64`` writes and signals to others (``pid`` is then unused). A
    worker runs under the server's program and its own ``worker_filter``: together they
    refuse exactly what ``build_filter(pid)`` refuses.
    """
    machine = machine or platform.machine()
    prog, nrs, deny = _prologue(machine)
    enosys = _RET_ERRNO | errno.ENOSYS

    def deny_nr(name: str, action: int) -> None:
        nr = nrs[name]
        if nr is not None:
            prog.extend([_jump(_JEQ_K, nr, 0, 1), _stmt(_RET_K, action)])

    for name in _DENY:
        if not (server and name in _SERVER_ALLOWED):
            deny_nr(name, deny)
    for name in _ENOSYS:
        deny_nr(name, enosys)

    # Each block below ends in RET on every path: the accumulator no longer holds the
    # syscall number once an argument has been loaded.
    prog += _clone_block(nrs, deny, allow_fork=server)
    for name, flags_arg in (("open", 1), ("openat", 2)):
        nr = nrs[name]
        if nr is None:
            continue
        prog += [
            _jump(_JEQ_K, nr, 0, 4),
            _stmt(_LD_W_ABS, _arg_lo(flags_arg)),
            _jump(_JSET_K, _OPEN_WRITE_FLAGS, 0, 1),
            _stmt(_RET_K, deny),
            _stmt(_RET_K, _RET_ALLOW),
        ]
    if not server:
        prog += _signal_and_limit_blocks(nrs, deny, pid)
    prog.append(_stmt(_RET_K, _RET_ALLOW))
    return prog


def worker_filter(pid: int, machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """What a worker adds on top of the server's program (``build_filter(server=True)``):
    ``_SERVER_ALLOWED`` again, ``fork`` through ``clone``, ``prlimit64`` writes and
    signals to any process but ``pid``. Small, so that installing it costs a fresh
    worker tens of microseconds, not the few hundred the whole program takes."""
    machine = machine or platform.machine()
    prog, nrs, deny = _prologue(machine)
    for name in sorted(_SERVER_ALLOWED):
        nr = nrs[name]
        if nr is not None:
            prog.extend([_jump(_JEQ_K, nr, 0, 1), _stmt(_RET_K, deny)])
    prog += _clone_block(nrs, deny, allow_fork=False)
    prog += _signal_and_limit_blocks(nrs, deny, pid)
    prog.append(_stmt(_RET_K, _RET_ALLOW))
    return prog


def _prologue(
    machine: str,
) -> tuple[list[tuple[int, int, int, int]], dict[str, int | None], int]:
    """Kill a foreign architecture (and x32), then load the syscall number."""
    if machine not in _ARCHES:
        raise SeccompUnavailable(f"seccomp filter: unsupported architecture {machine!r}")
    audit_arch, is_x86, nrs = _ARCHES[machine]
    prog: list[tuple[int, int, int, int]] = [
        _stmt(_LD_W_ABS, _OFF_ARCH),
        _jump(_JEQ_K, audit_arch, 1, 0),
        _stmt(_RET_K, _RET_KILL_PROCESS),
        _stmt(_LD_W_ABS, _OFF_NR),
    ]
    if is_x86:
        prog += [_jump(_JGE_K, _X32_SYSCALL_BIT, 0, 1), _stmt(_RET_K, _RET_KILL_PROCESS)]
    return prog, nrs, _RET_ERRNO | errno.EPERM


def _clone_block(
    nrs: dict[str, int | None], deny: int, *, allow_fork: bool
) -> list[tuple[int, int, int, int]]:
    """``clone``: never with namespace flags; without ``CLONE_THREAD`` (a fork) only
    when ``allow_fork``."""
    clone = nrs["clone"]
    assert clone is not None
    block = [_jump(_JEQ_K, clone, 0, 6 if not allow_fork else 4), _stmt(_LD_W_ABS, _arg_lo(0))]
    if not allow_fork:
        block += [_jump(_JSET_K, _CLONE_THREAD, 1, 0), _stmt(_RET_K, deny)]
    block += [
        _jump(_JSET_K, _CLONE_NAMESPACES, 0, 1),
        _stmt(_RET_K, deny),
        _stmt(_RET_K, _RET_ALLOW),
    ]
    return block


def _signal_and_limit_blocks(
    nrs: dict[str, int | None], deny: int, pid: int
) -> list[tuple[int, int, int, int]]:
    prog: list[tuple[int, int, int, int]] = []
    # kill/tkill/tgkill: only the worker itself (pid_t is 32 bits, the low word decides).
    for name in ("kill", "tkill", "tgkill"):
        nr = nrs[name]
        assert nr is not None
        prog += [
            _jump(_JEQ_K, nr, 0, 4),
            _stmt(_LD_W_ABS, _arg_lo(0)),
            _jump(_JEQ_K, pid & 0xFFFFFFFF, 0, 1),
            _stmt(_RET_K, _RET_ALLOW),
            _stmt(_RET_K, deny),
        ]
    # prlimit64 may read limits (new_limit == NULL) but never set them.
    prlimit = nrs["prlimit64"]
    assert prlimit is not None
    prog += [
        _jump(_JEQ_K, prlimit, 0, 6),
        _stmt(_LD_W_ABS, _arg_lo(2)),
        _jump(_JEQ_K, 0, 0, 3),
        _stmt(_LD_W_ABS, _arg_hi(2)),
        _jump(_JEQ_K, 0, 0, 1),
        _stmt(_RET_K, _RET_ALLOW),
        _stmt(_RET_K, deny),
    ]
    return prog


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


@functools.cache
def _template(kind: str = "full") -> tuple[bytes, tuple[int, ...]]:
    """The packed program of ``kind`` (``full``: ``build_filter``, ``worker``:
    ``worker_filter``) for this machine and the byte offsets of its pid constants.

    Building and packing a program costs a fresh worker a few hundred microseconds
    (and a dlopen more), so the fork server does it once (``prepare``) and each worker
    only patches its pid in. The pid slots are found by building for two pids.
    """
    build = worker_filter if kind == "worker" else build_filter
    a, b = build(0), build(1)
    slots = tuple(i * 8 + 4 for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
    return b"".join(struct.pack("=HBBI", *insn) for insn in a), slots


@functools.cache
def _prctl() -> Any:
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return prctl


class _Program:
    """A ``struct sock_fprog`` of one kind, built once: its instruction buffer (whose pid
    slots each installer patches in place) and the structure's address for ``prctl``.

    Built in the fork server: creating the buffer and the structure, and ``cast`` and
    ``addressof``, ran ctypes' Python and C machinery in every worker, writing to some
    forty pages it otherwise shares with the server (~0.18 MB of private memory each).
    """

    __slots__ = ("address", "buffer", "fprog", "slots")

    def __init__(self, kind: str) -> None:
        template, self.slots = _template(kind)
        self.buffer = ctypes.create_string_buffer(template, len(template))
        self.fprog = _SockFprog(len(template) // 8, ctypes.cast(self.buffer, ctypes.c_void_p))
        self.address: int = ctypes.addressof(self.fprog)

    def patched(self, pid: int) -> int:
        """Write ``pid`` into the program; the address to install it from."""
        _patch_pid(self.buffer, self.slots, pid)
        return self.address


def _patch_pid(program: Any, slots: tuple[int, ...], pid: int) -> None:
    """Write ``pid`` into a packed program's pid constants (``_template``'s slots)."""
    for offset in slots:
        struct.pack_into("=I", program, offset, pid & 0xFFFFFFFF)


@functools.cache
def _program(kind: str) -> _Program:
    return _Program(kind)


def prepare() -> None:
    """Build what ``install_filter`` needs ahead of the fork (called in the fork server).

    Raises ``SeccompUnavailable`` on an unsupported architecture (``install_filter``
    then raises it again in each worker, which reports it as a note).
    """
    _prctl()
    _program("full")
    _program("worker")


def packed_filter(pid: int, kind: str = "full") -> bytes:
    """``build_filter(pid)`` (or ``worker_filter`` for ``kind="worker"``) packed as a
    ``struct sock_filter`` array, from the template."""
    template, slots = _template(kind)
    raw = bytearray(template)
    _patch_pid(raw, slots, pid)
    return bytes(raw)


def install_filter(pid: int, kind: str = "full") -> None:
    """Set ``no_new_privs`` and install a filter on the calling (single-threaded) process:
    ``full`` (``build_filter(pid)``), ``server`` (``build_filter(server=True)``) or
    ``worker`` (``worker_filter(pid)``, on top of the server's).

    Raises ``SeccompUnavailable`` when the kernel refuses.
    """
    if kind == "server":
        raw = b"".join(struct.pack("=HBBI", *insn) for insn in build_filter(0, server=True))
        buf = ctypes.create_string_buffer(raw, len(raw))
        fprog = _SockFprog(len(raw) // 8, ctypes.cast(buf, ctypes.c_void_p))
        address = ctypes.addressof(fprog)
    else:
        address = _program(kind).patched(pid)
    prctl = _prctl()
    if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise SeccompUnavailable(f"prctl(PR_SET_NO_NEW_PRIVS) failed: {errno.errorcode.get(err)}")
    if prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, address, 0, 0) != 0:
        err = ctypes.get_errno()
        raise SeccompUnavailable(f"prctl(PR_SET_SECCOMP) failed: {errno.errorcode.get(err)}")
