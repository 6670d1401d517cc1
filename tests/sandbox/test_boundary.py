"""The kernel layers hold even with the guards bypassed.

These tests run *unrestricted* Python inside real workers through the test-only ``raw``
guest (``sandbox/worker/_raw_guest.py``, never registered by ``PythonRuntime``): if a program
escaped RestrictedPython entirely, this is what it could still do. They also send
hostile frames over the bridge.
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from sandbox_helpers import bindings, err, ok

from codemode.engine import AbortController, CodeRunRequest, CodeRunResult
from codemode.sandbox import Limits, PythonRuntime
from codemode.sandbox.worker._seccomp import _program, build_filter, packed_filter, worker_filter

pytestmark = pytest.mark.anyio

MEMORY = 256 * 2**20


@pytest.fixture(scope="module")
async def raw_runtime() -> AsyncIterator[PythonRuntime]:
    guests = {
        "python": "codemode.sandbox.python._guest",
        "raw": "codemode.sandbox.worker._raw_guest",
    }
    limits = Limits(
        max_compute_ms=5_000, max_wall_ms=20_000, max_memory_bytes=MEMORY, max_sub_calls=5
    )
    async with PythonRuntime(limits, _guests=guests) as rt:
        yield rt


async def raw(runtime: PythonRuntime, program: str) -> CodeRunResult:
    request = CodeRunRequest(program, bindings(), AbortController().signal)
    with anyio.fail_after(30):
        return await runtime._run_guest(request, "raw")


async def probe(runtime: PythonRuntime, program: str) -> Any:
    """Run raw ``program`` (which sets ``result``) and return ``result``."""
    return ok(await raw(runtime, program))


@asynccontextmanager
async def locked_worker(runtime: PythonRuntime) -> AsyncIterator[int]:
    """A freshly forked worker that reported ``ready`` (so is fully locked down); yields
    its pid for inspection from the host side.

    Workers have no ``/proc`` of their own (their root is empty), so the host reads
    ``/proc/<pid>/...`` instead, which is also independent of what the worker claims.
    """
    pool = runtime._pool
    assert pool is not None
    worker = await pool._spawn()
    try:
        yield worker.pid
    finally:
        worker.kill()
        worker.close()


def read_lines(path: str) -> list[str]:
    with open(path) as handle:
        return handle.read().splitlines()


def proc_status(pid: int, *fields: str) -> list[str]:
    return [line for line in read_lines(f"/proc/{pid}/status") if line.startswith(fields)]


def errno_of(call: str) -> str:
    return (
        "import errno\n"
        "try:\n"
        f"    {call}\n"
        "    result = 'allowed'\n"
        "except OSError as e:\n"
        "    result = errno.errorcode.get(e.errno, str(e.errno))\n"
    )


async def test_python_runtime_does_not_offer_the_raw_guest() -> None:
    assert PythonRuntime.guest_modules == {"python": "codemode.sandbox.python._guest"}


async def test_raw_guest_is_not_served_unless_registered(runtime: PythonRuntime) -> None:
    request = CodeRunRequest("result = 1", bindings(), AbortController().signal)
    assert err(await runtime._run_guest(request, "raw")) == 'unknown guest "raw"'


# -- seccomp ----------------------------------------------------------------------------


async def test_seccomp_filter_is_installed(raw_runtime: PythonRuntime) -> None:
    async with locked_worker(raw_runtime) as pid:
        assert proc_status(pid, "Seccomp:", "NoNewPrivs:") == ["NoNewPrivs:\t1", "Seccomp:\t2"]


@pytest.mark.parametrize(
    "call",
    [
        "os.fork()",
        "os.posix_spawn('/bin/true', ['true'], {})",
        "os.execv('/bin/true', ['true'])",
        "socket.socket(socket.AF_INET, socket.SOCK_STREAM)",
        "socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)",
        "socket.socketpair()",
        "os.kill(1, 0)",
        "os.kill(os.getppid(), 9)",
        "open('/tmp/codemode-escape', 'w')",
        "open('/tmp/codemode-escape', 'a')",
        "os.open('/tmp', os.O_RDONLY | os.O_TMPFILE)",
        "os.mkdir('/tmp/codemode-escape-dir')",
        "os.unlink('/etc/hostname')",
        "os.rename('/etc/hostname', '/etc/x')",
        "os.chmod('/tmp', 0o777)",
        "os.symlink('/etc/passwd', '/tmp/codemode-link')",
        # Same values as already set: the kernel would allow it, seccomp does not.
        "libc_call('prlimit', 0, 7, (ctypes.c_ulong * 2)(64, 64), None)",
        "os.setuid(0)",
        "os.unshare(0x40000000) if hasattr(os, 'unshare') else libc_call('unshare', 0x40000000)",
        "libc_call('ptrace', 0, 0, 0, 0)",
        "libc_call('mount', b'none', b'/tmp', b'tmpfs', 0, 0)",
        "libc_call('chroot', b'/tmp')",
        "libc_call('prctl', 38, 0, 0, 0, 0)",
        "libc_call('syscall', 425, 8, 0)",
    ],
)
async def test_seccomp_denies(raw_runtime: PythonRuntime, call: str) -> None:
    program = (
        "import os, socket, resource, ctypes, errno\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def libc_call(name, *args):\n"
        "    if getattr(libc, name)(*args) == -1:\n"
        "        err = ctypes.get_errno()\n"
        "        raise OSError(err, os.strerror(err))\n"
        "    return 0\n"
        "pid = None\n"
        "try:\n"
        f"    pid = {call}\n"
        "    result = 'allowed'\n"
        "except OSError as e:\n"
        "    result = errno.errorcode.get(e.errno, str(e.errno))\n"
        "if pid == 0:\n"
        "    os._exit(0)\n"
    )
    assert await probe(raw_runtime, program) == "EPERM"


@pytest.mark.parametrize("pid", [2, 4242, 2**22, 2**31 - 1])
def test_the_precomputed_filter_is_the_built_filter(pid: int) -> None:
    # Workers patch their pid into a template built once in the fork server; the result
    # must be exactly the program build_filter describes (and the tests above check).
    expected = b"".join(struct.pack("=HBBI", *insn) for insn in build_filter(pid))
    assert packed_filter(pid) == expected
    # What install_filter hands the kernel: the program prepared in the fork server,
    # patched in place (twice here, so a second worker pid overwrites the first).
    for kind, build in (("full", build_filter), ("worker", worker_filter)):
        program = _program(kind)
        program.patched(7)
        address = program.patched(pid)
        assert address == ctypes.addressof(program.fprog)
        assert program.fprog.len * 8 == len(program.buffer.raw)
        assert program.fprog.filter == ctypes.addressof(program.buffer)
        assert program.buffer.raw == b"".join(struct.pack("=HBBI", *i) for i in build(pid))


async def test_subprocess_is_impossible(raw_runtime: PythonRuntime) -> None:
    program = (
        "import subprocess\ntry:\n    subprocess.run(['/bin/echo', 'escaped'], check=True)\n"
        "    result = 'ran'\nexcept OSError as e:\n    result = type(e).__name__\n"
    )
    assert await probe(raw_runtime, program) == "PermissionError"


async def test_threads_are_refused(raw_runtime: PythonRuntime) -> None:
    program = (
        "import threading\ntry:\n    threading.Thread(target=lambda: None).start()\n"
        "    result = 'started'\nexcept RuntimeError as e:\n    result = str(e)\n"
    )
    assert await probe(raw_runtime, program) == "can't start new thread"


@pytest.mark.skipif(os.geteuid() != 0, reason="raising hard limits needs the dropped privilege")
async def test_hard_limits_cannot_be_raised(raw_runtime: PythonRuntime) -> None:
    program = (
        "import resource\ntry:\n"
        "    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY,) * 2)\n"
        "    result = 'raised'\nexcept ValueError as e:\n    result = str(e)\n"
    )
    assert await probe(raw_runtime, program) == "not allowed to raise maximum limit"


async def test_reading_limits_still_works(raw_runtime: PythonRuntime) -> None:
    program = (
        "import resource\nresult = [list(resource.getrlimit(r)) for r in "
        "(resource.RLIMIT_AS, resource.RLIMIT_FSIZE, resource.RLIMIT_CORE, resource.RLIMIT_NOFILE)]"
    )
    assert await probe(raw_runtime, program) == [[MEMORY, MEMORY], [0, 0], [0, 0], [64, 64]]


# -- rlimits, credentials, namespaces, environment ---------------------------------------


async def test_memory_rlimit_holds_without_guards(raw_runtime: PythonRuntime) -> None:
    program = "try:\n    x = bytearray(2 * 256 * 2**20)\n    result = 'allocated'\nexcept MemoryError:\n    result = 'MemoryError'"
    assert await probe(raw_runtime, program) == "MemoryError"


async def test_open_files_rlimit(raw_runtime: PythonRuntime) -> None:
    # dup, not open: the worker can open no path at all.
    program = (
        "import errno, os\nhandles = []\ntry:\n    for _ in range(200):\n"
        "        handles.append(os.dup(0))\n    result = 'unbounded'\n"
        "except OSError as e:\n    result = [errno.errorcode[e.errno], len(handles) < 64]\n"
    )
    assert await probe(raw_runtime, program) == ["EMFILE", True]


async def test_cpu_rlimit_is_the_kernel_backstop(raw_runtime: PythonRuntime) -> None:
    program = "import resource\nresult = list(resource.getrlimit(resource.RLIMIT_CPU))"
    assert await probe(raw_runtime, program) == [7, 7]  # ceil(5 s) + 2 s


@pytest.mark.skipif(os.geteuid() != 0, reason="privilege drop applies when the host runs as root")
async def test_worker_runs_as_nobody_without_capabilities(raw_runtime: PythonRuntime) -> None:
    program = "import os\nresult = [os.getuid(), os.geteuid(), os.getgid(), os.getgroups()]"
    assert await probe(raw_runtime, program) == [65534, 65534, 65534, []]
    async with locked_worker(raw_runtime) as pid:
        caps = [line.split()[1] for line in proc_status(pid, "CapEff", "CapPrm")]
    assert caps == ["0" * 16, "0" * 16]


@pytest.mark.skipif(os.geteuid() != 0, reason="a private network namespace needs root here")
async def test_private_network_namespace(raw_runtime: PythonRuntime) -> None:
    async with locked_worker(raw_runtime) as pid:
        namespace = os.readlink(f"/proc/{pid}/ns/net")
        lines = read_lines(f"/proc/{pid}/net/dev")
        interfaces = [line.split(":")[0].strip() for line in lines[2:]]
    assert namespace != os.readlink("/proc/self/ns/net")
    assert interfaces == ["lo"]


async def test_empty_environment_and_empty_read_only_cwd(raw_runtime: PythonRuntime) -> None:
    program = "import os\nresult = [dict(os.environ), os.getcwd()]"
    env, cwd = await probe(raw_runtime, program)
    assert env == {}
    # The cwd is the worker's (empty, private) root on hosts with a mount namespace.
    assert cwd == "/" or cwd.startswith("/tmp/codemode-worker-")
    async with locked_worker(raw_runtime) as pid:
        host_cwd = os.readlink(f"/proc/{pid}/cwd")
    assert os.path.basename(host_cwd).startswith("codemode-worker-")
    assert os.listdir(host_cwd) == []
    assert await probe(raw_runtime, errno_of("open('new-file', 'w')")) == "EPERM"


async def test_only_the_bridge_is_inherited(raw_runtime: PythonRuntime) -> None:
    async with locked_worker(raw_runtime) as pid:
        fds = sorted(int(f) for f in os.listdir(f"/proc/{pid}/fd"))
        kinds = [os.readlink(f"/proc/{pid}/fd/{f}").split(":")[0] for f in fds]
    # stdio on /dev/null; the bridge and the event loop's self-pipe (sockets); epoll.
    assert kinds[:3] == ["/dev/null"] * 3
    assert sorted(kinds[3:]) == ["anon_inode", "socket", "socket", "socket"]


async def test_worker_is_its_own_process_group(raw_runtime: PythonRuntime) -> None:
    program = "import os\nresult = [os.getpgid(0) == os.getpid(), os.getsid(0) == os.getpid()]"
    assert await probe(raw_runtime, program) == [True, True]


async def test_worker_dies_with_the_fork_server(raw_runtime: PythonRuntime) -> None:
    # PR_GET_PDEATHSIG cannot be read back under seccomp (prctl is denied), so check the
    # other direction: the worker's parent is the fork server, not the host. (Inside its
    # PID namespace the worker sees its parent as 0, so the host reads it.)
    server = raw_runtime.processes().server_pid
    async with locked_worker(raw_runtime) as pid:
        assert proc_status(pid, "PPid:") == [f"PPid:\t{server}"]


# -- hostile bridge peers -----------------------------------------------------------------


async def test_hostile_frames_are_dropped_and_counted(raw_runtime: PythonRuntime) -> None:
    before = raw_runtime.stats.dropped_frames
    program = r"""
import json
def frame(obj):
    data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return len(data).to_bytes(4, 'big') + data
junk = [
    b'not json',
    {'type': 'nonsense'},
    {'type': 'log'},
    {'type': 'log', 'text': 5},
    {'type': 'call', 'id': 'x', 'global': 'tools', 'name': 'echo', 'args': {}},
    {'type': 'call', 'id': -1, 'global': 'tools', 'name': 'echo', 'args': {}},
    {'type': 'ready', 'pid': 1},
    {'type': 'done', 'error': {'kind': 'timeout', 'message': 'forged'}},
    {'type': 'result', 'id': 0, 'ok': True},
]
for item in junk:
    bridge.send_raw(frame(item))
bridge.send_raw((2**31).to_bytes(4, 'big') + b'x' * 1000)
"""
    result = await raw(raw_runtime, program)
    assert result.error is not None
    dropped = raw_runtime.stats.dropped_frames - before
    # The nine junk frames, then the oversized one (which also ends the bridge).
    assert dropped == 10, dropped


async def test_duplicate_call_ids_are_ignored_and_logs_are_metered(
    raw_runtime: PythonRuntime,
) -> None:
    program = r"""
import json, time
def send(obj):
    data = json.dumps(obj).encode()
    bridge.send_raw(len(data).to_bytes(4, 'big') + data)
send({'type': 'log', 'text': 'forged but metered'})
send({'type': 'call', 'id': 1, 'global': 'tools', 'name': 'echo', 'args': {'n': 1}})
send({'type': 'call', 'id': 1, 'global': 'tools', 'name': 'echo', 'args': {'n': 2}})
send({'type': 'call', 'id': 2, 'global': 'nope', 'name': 'echo', 'args': {}})
bridge.sock.setblocking(True)
replies = []
buf = b''
while len(replies) < 2:
    buf += bridge.sock.recv(65536)
    while len(buf) >= 4 and len(buf) >= 4 + int.from_bytes(buf[:4], 'big'):
        n = int.from_bytes(buf[:4], 'big')
        replies.append(json.loads(buf[4:4 + n]))
        buf = buf[4 + n:]
time.sleep(0.2)
bridge.sock.setblocking(False)
try:
    extra = bridge.sock.recv(65536)
except BlockingIOError:
    extra = b''
result = [sorted((r['id'], r['ok'], r.get('value'), r.get('message')) for r in replies), extra]
"""
    result = await raw(raw_runtime, program)
    value = ok(result)
    assert value == [
        [[1, True, {"n": 1}, None], [2, False, None, 'unknown binding "nope.echo"']],
        "",
    ]
    assert result.logs == ["forged but metered"]


async def test_too_many_calls_from_a_raw_peer(raw_runtime: PythonRuntime) -> None:
    program = r"""
import json, time
for i in range(10):
    data = json.dumps({'type': 'call', 'id': i, 'global': 'tools', 'name': 'slow', 'args': {}}).encode()
    bridge.send_raw(len(data).to_bytes(4, 'big') + data)
time.sleep(5)
"""
    assert (
        err(await raw(raw_runtime, program), "sub-call-limit")
        == "sub-call limit reached (5 calls per run)"
    )


async def test_worker_exit_code_is_reported(raw_runtime: PythonRuntime) -> None:
    assert err(await raw(raw_runtime, "import os\nos._exit(3)"), "worker-exit") == (
        "worker exited with code 3 before completing"
    )
