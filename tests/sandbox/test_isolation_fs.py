"""Workers see no host filesystem, even with the guards bypassed entirely.

A program that escapes RestrictedPython (or the QuickJS prelude) has the real ``open``
and ``os``. These tests give it exactly that, through the test-only ``raw`` guest, and
check that nothing of the host can be read, listed or (as root) even ``stat``-ed: the
worker's root is an empty private tmpfs (``sandbox/worker/_mountns.py``) and Landlock denies
every path access on top (``sandbox/worker/_landlock.py``). They also check that what programs
legitimately use after the fork (randomness, hashing, time zones, decimals) still works.

Each attack probe reports ``["read", ...]`` when the access succeeded; the test fails
then, and also if a planted secret shows up anywhere in the answer.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from sandbox_helpers import bindings, ok

from codemode.engine import AbortController, CodeRunRequest
from codemode.sandbox import Limits, PythonRuntime
from codemode.sandbox.worker import _boundary, _landlock

pytestmark = pytest.mark.anyio

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="the private root needs root here")
SOURCE = Path(_boundary.__file__).resolve()


@pytest.fixture(scope="module")
async def raw_runtime() -> AsyncIterator[PythonRuntime]:
    guests = {
        "python": "codemode.sandbox.python._guest",
        "raw": "codemode.sandbox.worker._raw_guest",
    }
    async with PythonRuntime(
        Limits(max_compute_ms=5_000, max_wall_ms=20_000), _guests=guests
    ) as rt:
        yield rt


@pytest.fixture(scope="module")
def other_workspace() -> Iterator[tuple[Path, str]]:
    """Another workspace on the host, world-readable (so only isolation can hide it)."""
    secret = f"codemode-secret-{uuid.uuid4()}"
    directory = Path(tempfile.mkdtemp(prefix="codemode-other-ws-", dir="/tmp"))
    directory.chmod(0o755)
    (directory / "notes.txt").write_text(secret)
    (directory / "notes.txt").chmod(0o644)
    try:
        yield directory, secret
    finally:
        shutil.rmtree(directory)


async def probe(runtime: PythonRuntime, program: str) -> Any:
    request = CodeRunRequest(program, bindings(), AbortController().signal)
    with anyio.fail_after(30):
        return ok(await runtime._run_guest(request, "raw"))


def attempt(expression: str) -> str:
    """A raw program evaluating ``expression``: ``["read", repr]`` or ``["denied", errno]``."""
    return (
        "import errno, os\n"
        "try:\n"
        f"    value = {expression}\n"
        "    result = ['read', repr(value)[:4000]]\n"
        "except OSError as e:\n"
        "    result = ['denied', errno.errorcode.get(e.errno, str(e.errno))]\n"
    )


def read_lines(path: str) -> list[str]:
    with open(path) as handle:
        return handle.read().splitlines()


def assert_denied(answer: Any, *secrets: str) -> None:
    assert answer[0] == "denied", answer
    for secret in secrets:
        assert secret not in json.dumps(answer)


@pytest.mark.parametrize(
    "expression",
    [
        "open('/etc/passwd').read()",
        "open('/etc/hostname').read()",
        "open('/proc/1/cmdline', 'rb').read()",
        "open('/proc/self/status').read()",
        "open('/proc/self/root/etc/passwd').read()",
        "open('../../../../../etc/passwd').read()",
        "os.listdir('/etc')",
        "os.listdir('/proc')",
        "os.listdir('/tmp')",
        "[e.name for e in os.scandir('/usr')]",
        "open('/dev/urandom', 'rb').read(8)",
    ],
)
async def test_host_files_cannot_be_read_or_listed(
    raw_runtime: PythonRuntime, expression: str
) -> None:
    assert_denied(await probe(raw_runtime, attempt(expression)), "root:x:0:0")


async def test_the_root_lists_nothing(raw_runtime: PythonRuntime) -> None:
    # Under Landlock listing is refused; under the bare private root it is empty. A host
    # directory entry in the answer means neither layer holds.
    answer = await probe(raw_runtime, attempt("os.listdir('/') + os.listdir('.')"))
    landlock = _landlock.abi_version() >= 1
    assert answer == (["denied", "EACCES"] if landlock else ["read", "[]"]), answer


async def test_another_workspace_is_unreachable(
    raw_runtime: PythonRuntime, other_workspace: tuple[Path, str]
) -> None:
    directory, secret = other_workspace
    for expression in (
        f"open({str(directory / 'notes.txt')!r}).read()",
        f"os.listdir({str(directory)!r})",
    ):
        assert_denied(await probe(raw_runtime, attempt(expression)), secret, "notes.txt")


async def test_the_projects_own_source_is_unreachable(raw_runtime: PythonRuntime) -> None:
    first_line = SOURCE.read_text().splitlines()[0]
    for expression in (
        f"open({str(SOURCE)!r}).read()",
        f"os.listdir({str(SOURCE.parent)!r})",
        # The path the worker itself knows its code by.
        "open(__import__('sys').modules['codemode.sandbox.worker._boundary'].__file__).read()",
    ):
        assert_denied(await probe(raw_runtime, attempt(expression)), first_line)


@ROOT_ONLY
@pytest.mark.parametrize(
    "expression",
    [
        "os.stat('/etc/passwd')",
        f"os.stat({str(SOURCE)!r})",
        "os.readlink('/proc/self/exe')",
        "os.lstat('/tmp')",
        "os.chdir('/etc')",
    ],
)
async def test_host_paths_do_not_even_exist_as_root(
    raw_runtime: PythonRuntime, expression: str
) -> None:
    # Landlock alone would let these through (metadata is not a path access); the empty
    # private root makes every host path absent.
    assert await probe(raw_runtime, attempt(expression)) == ["denied", "ENOENT"]


@ROOT_ONLY
async def test_walking_up_stays_in_the_empty_root(raw_runtime: PythonRuntime) -> None:
    program = (
        "import os\nfor _ in range(20):\n    os.chdir('..')\n"
        "result = [os.getcwd(), os.path.exists('/etc'), os.path.exists('/proc'), os.path.exists('/tmp')]"
    )
    assert await probe(raw_runtime, program) == ["/", False, False, False]


@ROOT_ONLY
async def test_the_worker_root_is_the_empty_private_tmpfs(raw_runtime: PythonRuntime) -> None:
    pool = raw_runtime._pool
    assert pool is not None
    worker = await pool._spawn()
    try:
        root = os.readlink(f"/proc/{worker.pid}/root")
        mount_ns = os.readlink(f"/proc/{worker.pid}/ns/mnt")
        lines = read_lines(f"/proc/{worker.pid}/mountinfo")
        mounts = {line.split()[4]: line.split(" - ")[1].split() for line in lines}
    finally:
        worker.kill()
        worker.close()
    assert os.path.basename(root).startswith("codemode-worker-")
    assert mount_ns != os.readlink("/proc/self/ns/mnt")
    # mountinfo of a chrooted process is relative to its root; the root mount is the tmpfs.
    fstype, _source, options = mounts["/"]
    assert fstype == "tmpfs"
    assert options.split(",")[0] == "ro"
    # The mount exists only in the fork server's namespace: the host sees a plain directory.
    assert root not in {line.split()[4] for line in read_lines("/proc/self/mountinfo")}


@ROOT_ONLY
async def test_replacing_the_root_directory_on_the_host_changes_nothing() -> None:
    # The host sees the server's work directory as a plain empty directory (the tmpfs is
    # mounted only in the server's namespace). A host process (a /tmp cleaner, a
    # hostile same-uid process) may remove it and put a symlink to / in its place:
    # workers enter their root through the server's descriptor, never by that path.
    guests = {
        "python": "codemode.sandbox.python._guest",
        "raw": "codemode.sandbox.worker._raw_guest",
    }
    async with PythonRuntime(Limits(pool_size=1), _guests=guests) as runtime:
        pool = runtime._pool
        assert pool is not None
        worker = await pool._spawn()
        host_path = os.readlink(f"/proc/{worker.pid}/cwd")
        worker.kill()
        worker.close()
        os.rmdir(host_path)
        os.symlink("/", host_path)
        try:
            program = "import os\nresult = [os.path.exists('/etc'), os.path.exists('/tmp')]"
            for _ in range(3):  # the idle worker forked before, and fresh ones after
                assert await probe(runtime, program) == [False, False]
            fresh = await pool._spawn()
            assert fresh.notes == []
            fresh.kill()
            fresh.close()
        finally:
            os.unlink(host_path)


async def test_what_programs_use_still_works_with_no_file_behind_it(
    raw_runtime: PythonRuntime,
) -> None:
    # Randomness comes from getrandom(2), not /dev/urandom; the time zone was read before
    # the fork; hashing and decimals are C code already loaded. The files are gone.
    program = (
        "import os, random, uuid, hashlib, datetime, decimal, statistics, re, time\n"
        "works = [\n"
        "    len(os.urandom(16)), 0 <= random.SystemRandom().random() < 1, uuid.uuid4().version,\n"
        "    hashlib.sha256(b'x').hexdigest()[:8], hashlib.blake2b(b'x').hexdigest()[:4],\n"
        "    datetime.datetime(2024, 1, 2, tzinfo=datetime.timezone.utc).astimezone().year,\n"
        "    time.localtime(0).tm_year, str(decimal.Decimal('1.10') + 1),\n"
        "    statistics.median([3, 1, 2]), re.findall(r'\\d+', 'a1b22'),\n"
        "]\n"
        "gone = []\n"
        "for path in ('/dev/urandom', '/etc/localtime', '/usr/share/zoneinfo/UTC', os.__file__):\n"
        "    try:\n"
        "        open(path, 'rb').close()\n"
        "        gone.append(path)\n"
        "    except OSError:\n"
        "        pass\n"
        "result = [works, gone]\n"
    )
    works, readable = await probe(raw_runtime, program)
    assert works == [16, True, 4, "2d711642", "0909", 2024, 1970, "2.10", 2, ["1", "22"]]
    assert readable == []


# -- without the private root: Landlock alone, and nothing at all -----------------------

_LANDLOCK_ONLY = r"""
import json, os, sys
from codemode.sandbox.worker import _boundary
secret_path, source = sys.argv[1], sys.argv[2]
spec = _boundary.BoundarySpec(memory_bytes=1 << 30, cpu_seconds=10)
notes = _boundary.apply_limits(spec) + _boundary.lock_down(spec, os.getppid(), False)
answers = {}
for name, action in (
    ("passwd", lambda: open("/etc/passwd").read()),
    ("proc", lambda: open("/proc/1/cmdline", "rb").read().decode()),
    ("listdir", lambda: os.listdir("/")),
    ("workspace", lambda: open(secret_path).read()),
    ("source", lambda: open(source).read()),
    # /etc/passwd: a path every uid may traverse to (the checkout may sit under a 0700
    # directory such as /root or a CI temp dir, where even stat fails for nobody).
    ("stat", lambda: os.stat("/etc/passwd").st_size > 0),
):
    try:
        answers[name] = ["read", repr(action())]
    except OSError as exc:
        answers[name] = ["denied", exc.strerror]
os.write(1, json.dumps({"notes": notes, "answers": answers, "uid": os.getuid()}).encode())
"""


def test_landlock_alone_denies_reading_and_says_what_it_leaves(
    other_workspace: tuple[Path, str],
) -> None:
    """The worker's own lock-down with no private root (a host without namespaces)."""
    directory, secret = other_workspace
    proc = subprocess.run(
        [sys.executable, "-I", "-c", _LANDLOCK_ONLY, str(directory / "notes.txt"), str(SOURCE)],
        capture_output=True, timeout=60, cwd="/", env={},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    report = json.loads(proc.stdout)
    answers = report["answers"]
    for name in ("passwd", "proc", "listdir", "workspace", "source"):
        assert answers[name][0] == "denied", (name, answers[name])
    assert secret not in proc.stdout.decode()
    # What Landlock leaves is named, not hidden.
    assert answers["stat"] == ["read", "True"]
    # Exactly one note on the filesystem (others, e.g. a skipped privilege drop, depend on
    # the host).
    assert [n for n in report["notes"] if "filesystem" in n] == [
        "no private filesystem root: Landlock denies opening, listing and running host"
        " files, but their metadata (stat, readlink) stays visible"
    ], report


def test_no_isolation_at_all_is_reported_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable() -> int:
        raise _landlock.LandlockUnavailable("Landlock is not available in this kernel")

    monkeypatch.setattr(_landlock, "deny_all", unavailable)
    (note,) = _boundary._deny_filesystem(chrooted=False)
    assert note.startswith("filesystem isolation unavailable: no private root and no Landlock")
    assert f"can read every file uid {os.geteuid()} may read" in note
    (note,) = _boundary._deny_filesystem(chrooted=True)
    assert "empty private root alone" in note


# -- an unprivileged host ------------------------------------------------------------------

_UNPRIVILEGED = r"""
import json, sys, anyio
from codemode.engine import AbortController, Binding, CodeRunRequest, ErrorClass
from codemode.sandbox import Limits, PythonRuntime

PROBES = {
    "passwd": "open('/etc/passwd').read()",
    "proc": "open('/proc/1/cmdline', 'rb').read()",
    "listdir": "os.listdir('/')",
    "workspace": "open(%r).read()" % sys.argv[1],
    "source": "open(%r).read()" % sys.argv[2],
}

async def main():
    guests = {"python": "codemode.sandbox.python._guest", "raw": "codemode.sandbox.worker._raw_guest"}
    out = {}
    async with PythonRuntime(Limits(pool_size=1), _guests=guests) as rt:
        for name, expression in PROBES.items():
            program = (
                "import os\ntry:\n    result = ['read', repr(%s)]\n"
                "except OSError as e:\n    result = ['denied', e.strerror]\n" % expression
            )
            request = CodeRunRequest(program, [Binding("tools", {}, ErrorClass())], AbortController().signal)
            result = await rt._run_guest(request, "raw")
            out[name] = result.value if result.error is None else ["error", result.error.message]
        worker = await rt._pool._spawn()
        notes = rt._pool._server.notes + worker.notes
        with open(f"/proc/{worker.pid}/status") as handle:
            caps = [l.split()[1] for l in handle if l.startswith(("CapEff", "CapPrm"))]
        worker.kill()
        worker.close()
    print(json.dumps({"answers": out, "notes": notes, "caps": caps}))

anyio.run(main)
"""


@ROOT_ONLY
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")
def test_an_unprivileged_host_is_isolated_too(other_workspace: tuple[Path, str]) -> None:
    """A whole pool (fork server and workers) run as ``nobody``: the same probes fail.

    With user namespaces the fork server builds the same private root inside one;
    without them Landlock alone holds (``test_landlock_alone_...``). The process keeps
    ``CAP_DAC_READ_SEARCH`` (ambient) only because this machine's interpreter lives under
    a root-only directory; it makes the test stricter, not looser: a worker with it
    could read every file on the host, were it not isolated.
    """
    directory, secret = other_workspace
    setpriv = shutil.which("setpriv")
    assert setpriv is not None
    proc = subprocess.run(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
         "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search",
         sys.executable, "-c", _UNPRIVILEGED, str(directory / "notes.txt"), str(SOURCE)],
        capture_output=True, timeout=120, cwd="/", env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    report = json.loads(proc.stdout)
    for name, answer in report["answers"].items():
        assert answer[0] == "denied", (name, answer)
    assert secret not in proc.stdout.decode()
    # Not root, so no uid change (reported, as before); but the capabilities the worker
    # would hold inside the server's user namespace are gone.
    assert "privilege drop skipped: not running as root" in report["notes"]
    assert report["caps"] == ["0" * 16, "0" * 16]
