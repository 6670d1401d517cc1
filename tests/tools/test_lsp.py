"""The ``lsp`` tool against the real ``jedi-language-server`` (and a scripted real server
for the failure paths: crashes, hangs, server-to-client requests, a flood of stderr)."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import alive, all_gone, error_of, text_of

from codemode.engine import (
    AbortController,
    MemorySessionLog,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRuntime,
)
from codemode.engine.policies import LocalSpillStore
from codemode.sandbox import Limits, PythonRuntime, TypeScriptRuntime
from codemode.tools._catalog import catalog_entry
from codemode.tools._config import ToolsConfig
from codemode.tools.fs._paths import Workspace
from codemode.tools.lsp import (
    LspManager,
    LspServerSpec,
    build_lsp_tool,
    default_servers,
    kill_all_servers,
    render_lsp,
)
from codemode.tools.lsp._positions import convert_column
from codemode.tools.lsp._tool import _checked

pytestmark = pytest.mark.anyio

A_PY = """def greet(name: str) -> str:
    \"\"\"Say hello to someone.\"\"\"
    return "hi " + name
"""
B_PY = """from pkg.a import greet

print(greet("x"))

print(greet("y"))
"""
WIDE_PY = """from pkg.a import greet
x = "\U0001f600" + greet("z")
"""

FAKE_SERVER = r'''"""A tiny real language server for the ``lsp`` tests' failure paths (run as a program).

It speaks LSP over stdio with ``Content-Length`` framing, like any server. Before answering
``initialize`` it asks the client ``workspace/configuration`` and
``window/workDoneProgress/create`` and records the answers in ``$FAKE_LSP_LOG``. Hover then
depends on the opened document's text: ``CRASH`` exits with code 3 (after a line on
stderr), ``HANG`` never answers, ``BIG`` floods stderr first (a client that does not drain
it would deadlock), ``DEEP`` answers JSON nested 200,000 deep, ``HUGE`` announces a
100 GB frame, anything else answers a list of MarkedStrings.
"""

from __future__ import annotations

import json
import os
import sys

_in = sys.stdin.buffer
_out = sys.stdout.buffer
_documents: dict[str, str] = {}
_next_id = 1000


def _log(entry: object) -> None:
    path = os.environ.get("FAKE_LSP_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")


def _read() -> dict[str, object] | None:
    length = None
    while True:
        line = _in.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("ascii").partition(":")
        if name.lower() == "content-length":
            length = int(value)
    assert length is not None
    message: dict[str, object] = json.loads(_in.read(length))
    return message


def _send(message: dict[str, object]) -> None:
    body = json.dumps(message).encode()
    _out.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    _out.flush()


def _ask(method: str, params: object) -> object:
    global _next_id
    _next_id += 1
    _send({"jsonrpc": "2.0", "id": _next_id, "method": method, "params": params})
    while True:
        message = _read()
        if message is None:
            sys.exit(0)
        if message.get("id") == _next_id and "method" not in message:
            return message.get("result", message.get("error"))


def main() -> None:
    while True:
        message = _read()
        if message is None:
            return
        method = message.get("method")
        params = message.get("params") or {}
        assert isinstance(params, dict)
        if method == "initialize":
            config = _ask("workspace/configuration", {"items": [{"section": "fake"}]})
            progress = _ask("window/workDoneProgress/create", {"token": "t1"})
            _log({"configuration": config, "progress": progress, "rootUri": params["rootUri"]})
            _send(
                {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "result": {"capabilities": {"hoverProvider": {}, "definitionProvider": True}},
                }
            )
        elif method == "textDocument/didOpen":
            doc = params["textDocument"]
            _documents[doc["uri"]] = doc["text"]
            _log({"didOpen": doc["uri"], "languageId": doc["languageId"]})
        elif method == "textDocument/didChange":
            doc = params["textDocument"]
            _documents[doc["uri"]] = params["contentChanges"][-1]["text"]
            _log({"didChange": doc["uri"], "version": doc["version"]})
        elif method == "textDocument/hover":
            text = _documents.get(params["textDocument"]["uri"], "")
            if "CRASH" in text:
                sys.stderr.write("fake server: crashing on purpose\n")
                sys.stderr.flush()
                sys.exit(3)
            if "HANG" in text:
                continue
            if "DEEP" in text:
                body = b'{"jsonrpc":"2.0","id":%d,"result":' % message["id"]
                body += b"[" * 200_000 + b"]" * 200_000 + b"}"
                _out.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
                _out.flush()
                continue
            if "HUGE" in text:
                _out.write(b"Content-Length: 99999999999\r\n\r\n")
                _out.flush()
                continue
            if "BIG" in text:
                sys.stderr.write("x" * 1_000_000 + "\n")
                sys.stderr.flush()
            _send(
                {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "result": {
                        "contents": ["plain part", {"language": "python", "value": "x = 1"}],
                    },
                }
            )
        elif method == "textDocument/definition":
            _send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32603, "message": "no"}})
        elif method == "shutdown":
            _log({"shutdown": True})
            _send({"jsonrpc": "2.0", "id": message["id"], "result": None})
        elif method == "exit":
            _log({"exit": True})
            return


if __name__ == "__main__":
    main()
'''


def _project(ws: Path) -> None:
    (ws / "pkg").mkdir()
    (ws / "pkg" / "__init__.py").write_text("")
    (ws / "pkg" / "a.py").write_text(A_PY)
    (ws / "pkg" / "b.py").write_text(B_PY)
    (ws / "notes.txt").write_text("greet\n")


def _cfg(ws: Path, tmp_path: Path) -> ToolsConfig:
    out = tmp_path / "out"
    return ToolsConfig(
        workspace=Workspace(ws),
        spill_store=LocalSpillStore(str(out / "spill")),
        output_dir=str(out),
    )


def _fake_spec(tmp_path: Path) -> LspServerSpec:
    script = tmp_path / "fake_server.py"
    if not script.exists():
        script.write_text(FAKE_SERVER)
    return LspServerSpec(
        name="fake",
        extensions=(".fake",),
        language_id="fake",
        command=(sys.executable, "-I", str(script)),
    )


class Lsp:
    """A runtime with only the ``lsp`` tool, over a running ``LspManager``."""

    def __init__(self, ws: Path, tmp_path: Path, manager: LspManager) -> None:
        self.ws = ws
        self.root = ws.resolve()
        self.manager = manager
        self.rt = ToolRuntime()
        self.rt.register(build_lsp_tool(_cfg(ws, tmp_path), manager))
        self.agent = self.rt.scope("agent", session=MemorySessionLog())

    async def call(self, **args: Any) -> ToolExecutionResult:
        return await self.rt.execute(
            ToolExecutionInput(
                call_id="c1",
                name="lsp",
                arguments=args,
                signal=AbortController().signal,
                agent=self.agent,
            )
        )

    async def ok(self, **args: Any) -> tuple[Any, str]:
        result = await self.call(**args)
        assert not result.is_error, result.to_json()
        return result.value, text_of(result)

    async def fail(self, **args: Any) -> tuple[str, str | None]:
        result = await self.call(**args)
        assert result.is_error, result.to_json()
        return error_of(result)


@pytest.fixture
def ws(workspace: Path) -> Path:
    _project(workspace)
    return workspace


@pytest.fixture
async def lsp(ws: Path, tmp_path: Path) -> AsyncIterator[Lsp]:
    log = tmp_path / "fake.log"
    env = {**os.environ, "FAKE_LSP_LOG": str(log)}
    async with LspManager(
        [*default_servers(), _fake_spec(tmp_path)],
        request_timeout_s=20,
        shutdown_grace_s=0.2,
        # The scripted server publishes no diagnostics: its first open would wait the whole
        # settle bound (jedi publishes at once).
        open_settle_s=1.0,
        env=env,
    ) as manager:
        yield Lsp(ws, tmp_path, manager)


def _in_session(sid: int) -> list[int]:
    """Live processes whose session is ``sid`` (a server leads its own session)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(") ", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:
            members.append(int(entry))
    return members


def _fake_log(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "fake.log"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _loc(uri: str, line: int, start: int, end: int) -> dict[str, Any]:
    return {
        "uri": uri,
        "range": {
            "start": {"line": line, "character": start},
            "end": {"line": line, "character": end},
        },
    }


# -- the real jedi-language-server -----------------------------------------------------------


async def test_definition_across_files(lsp: Lsp) -> None:
    value, shown = await lsp.ok(
        operation="goToDefinition", file_path="pkg/b.py", line=3, character=7
    )
    root = lsp.root
    assert value == {
        "kind": "locations",
        "locations": [_loc((root / "pkg" / "a.py").as_uri(), 0, 4, 9)],
        "resolvedWorkspaceUri": root.as_uri(),
    }
    assert shown == "pkg/a.py:1:5"
    # jedi offers no implementationProvider: said plainly rather than as an empty answer.
    message, code = await lsp.fail(
        operation="goToImplementation", file_path="pkg/b.py", line=3, character=7
    )
    assert code == "LSP_UNSUPPORTED"
    assert message == 'language server "jedi-language-server" does not support goToImplementation'


async def test_references_include_the_declaration_grouped_by_file(lsp: Lsp) -> None:
    # Asked from the declaring file (absolute path): the usages in b.py come after it.
    root = lsp.root
    value, shown = await lsp.ok(
        operation="findReferences", file_path=str(root / "pkg" / "a.py"), line=1, character=5
    )
    uris = [loc["uri"] for loc in value["locations"]]
    assert (root / "pkg" / "a.py").as_uri() in uris
    lines = shown.splitlines()
    assert lines == ["pkg/a.py:1:5", "pkg/b.py:1:19", "pkg/b.py:3:7", "pkg/b.py:5:7"]


async def test_hover_and_no_hover(lsp: Lsp) -> None:
    value, shown = await lsp.ok(operation="hover", file_path="pkg/b.py", line=3, character=7)
    assert value["kind"] == "hover"
    assert "Say hello to someone." in value["hover"]["contents"]
    assert value["hover"]["range"] == {
        "start": {"line": 2, "character": 6},
        "end": {"line": 2, "character": 11},
    }
    assert shown == value["hover"]["contents"]
    value, shown = await lsp.ok(operation="hover", file_path="pkg/b.py", line=2, character=1)
    assert value == {"kind": "hover", "hover": None}
    assert shown == "No hover information."


async def test_positions_count_utf16_code_units(lsp: Lsp) -> None:
    # `x = "😀" + greet(...)`: the emoji is two UTF-16 units, so `greet` starts at unit 12.
    (lsp.ws / "pkg" / "wide.py").write_text(WIDE_PY, encoding="utf-8")
    value, _ = await lsp.ok(operation="hover", file_path="pkg/wide.py", line=2, character=12)
    assert value["hover"]["range"]["start"] == {"line": 1, "character": 11}
    value, shown = await lsp.ok(
        operation="goToDefinition", file_path="pkg/wide.py", line=2, character=12
    )
    assert shown == "pkg/a.py:1:5"
    _, shown = await lsp.ok(operation="findReferences", file_path="pkg/a.py", line=1, character=5)
    assert "pkg/wide.py:2:12" in shown.splitlines()
    # A result in a file the server was never given: its columns come from the disk copy.
    (lsp.ws / "pkg" / "emo.py").write_text('E = "\U0001f600"; F = 1\n', encoding="utf-8")
    (lsp.ws / "pkg" / "use.py").write_text("from pkg.emo import F\nprint(F)\n")
    value, shown = await lsp.ok(
        operation="goToDefinition", file_path="pkg/use.py", line=2, character=7
    )
    assert shown == "pkg/emo.py:1:11"
    assert value["locations"][0]["range"]["end"] == {"line": 0, "character": 11}


def test_column_conversion() -> None:
    line = "a\U0001f600b\u00e9c"
    # b: code point 2, UTF-16 unit 3, UTF-8 byte 5.
    assert convert_column(line, 2, "utf-32", "utf-16") == 3
    assert convert_column(line, 3, "utf-16", "utf-32") == 2
    assert convert_column(line, 5, "utf-8", "utf-16") == 3
    assert convert_column(line, 5, "utf-16", "utf-8") == 8  # past "é" (two bytes)
    assert convert_column(line, 40, "utf-32", "utf-16") == 41  # past the end: excess kept
    assert convert_column(None, 7, "utf-32", "utf-16") == 7


async def test_a_file_changed_on_disk_is_resynced(lsp: Lsp) -> None:
    value, _ = await lsp.ok(operation="findReferences", file_path="pkg/b.py", line=3, character=7)
    before = len(value["locations"])
    (lsp.ws / "pkg" / "b.py").write_text(B_PY + 'print(greet("z"))\n')
    value, shown = await lsp.ok(
        operation="findReferences", file_path="pkg/b.py", line=3, character=7
    )
    assert len(value["locations"]) == before + 1
    assert "pkg/b.py:6:7" in shown.splitlines()


async def test_concurrent_calls_share_one_server(lsp: Lsp) -> None:
    results: list[str] = [""] * 8

    async def one(i: int) -> None:
        op = "hover" if i % 2 else "goToDefinition"
        _, results[i] = await lsp.ok(operation=op, file_path="pkg/b.py", line=3, character=7)

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(one, i)
    assert results[0::2] == ["pkg/a.py:1:5"] * 4
    assert all("Say hello to someone." in r for r in results[1::2])
    assert len(lsp.manager.running()) == 1


async def test_teardown_stops_every_server(ws: Path, tmp_path: Path) -> None:
    async with LspManager([*default_servers(), _fake_spec(tmp_path)], open_settle_s=1.0) as manager:
        lsp = Lsp(ws, tmp_path, manager)
        await lsp.ok(operation="hover", file_path="pkg/a.py", line=1, character=5)
        (ws / "x.fake").write_text("hello")
        await lsp.ok(operation="hover", file_path="x.fake", line=1, character=1)
        pids = [server.pid for server in manager.running()]
        assert len(pids) == 2 and all(alive(pid) for pid in pids)
        assert all(pid in _in_session(pid) for pid in pids)
    assert not any(alive(pid) for pid in pids)
    assert not any(_in_session(pid) for pid in pids)  # helpers the servers spawned too
    assert manager.running() == []
    # A closed manager refuses instead of starting a server nobody will stop.
    assert await lsp.fail(operation="hover", file_path="pkg/a.py", line=1, character=5) == (
        "the LSP manager is not running",
        "LSP_UNAVAILABLE",
    )


async def test_a_killed_server_is_restarted_on_the_next_call(lsp: Lsp) -> None:
    await lsp.ok(operation="hover", file_path="pkg/a.py", line=1, character=5)
    [server] = lsp.manager.running()
    os.killpg(server.pid, signal.SIGKILL)
    await server.process.wait()
    _, shown = await lsp.ok(operation="goToDefinition", file_path="pkg/b.py", line=3, character=7)
    assert shown == "pkg/a.py:1:5"
    [again] = lsp.manager.running()
    assert again.pid != server.pid and alive(again.pid)


# -- arguments, confinement, providers --------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "character", "message"),
    [
        (0, 1, "line must be a positive integer (one-based)"),
        (-3, 1, "line must be a positive integer (one-based)"),
        (1.5, 1, "line must be a positive integer (one-based)"),
        (1, 0, "character must be a positive integer (one-based)"),
        (1, 2.25, "character must be a positive integer (one-based)"),
    ],
)
async def test_bad_positions(lsp: Lsp, line: Any, character: Any, message: str) -> None:
    assert await lsp.fail(
        operation="hover", file_path="pkg/a.py", line=line, character=character
    ) == (message, "LSP_INVALID_ARGS")
    assert lsp.manager.running() == []  # refused before any server starts


def test_operation_and_path_checks() -> None:
    ok = {"operation": "hover", "file_path": "a.py", "line": 2.0, "character": 3}
    assert _checked(ok) == ("hover", "a.py", 2, 3)
    with pytest.raises(Exception) as info:
        _checked({**ok, "operation": "rename"})
    assert str(info.value) == (
        "operation must be one of goToDefinition, findReferences, goToImplementation, hover"
    )
    with pytest.raises(Exception) as info:
        _checked({**ok, "file_path": "  "})
    assert str(info.value) == "file_path must be a non-empty string"
    with pytest.raises(Exception) as info:
        _checked({**ok, "line": True})
    assert str(info.value) == "line must be a positive integer (one-based)"


async def test_an_unknown_operation_is_an_argument_error(lsp: Lsp) -> None:
    message, code = await lsp.fail(operation="rename", file_path="pkg/a.py", line=1, character=1)
    assert code == "INVALID_ARGS" and "operation" in message


async def test_files_outside_the_workspace_are_refused(lsp: Lsp, tmp_path: Path) -> None:
    outside = tmp_path / "secret.py"
    outside.write_text("SECRET = 1\n")
    (lsp.ws / "link.py").symlink_to(outside)
    message, code = await lsp.fail(operation="hover", file_path=str(outside), line=1, character=1)
    assert code == "FS_OUTSIDE_WORKSPACE"
    assert message == (f'cannot access "{outside}": the path is outside the workspace {lsp.root}')
    message, code = await lsp.fail(operation="hover", file_path="../secret.py", line=1, character=1)
    assert code == "FS_OUTSIDE_WORKSPACE"
    message, code = await lsp.fail(operation="hover", file_path="link.py", line=1, character=1)
    assert code == "FS_OUTSIDE_WORKSPACE"
    assert "a symbolic link leads outside" in message
    assert lsp.manager.running() == []  # nothing was handed to a server


async def test_missing_and_non_text_files(lsp: Lsp) -> None:
    message, code = await lsp.fail(operation="hover", file_path="nope.py", line=1, character=1)
    assert (message, code) == (f'cannot read "{lsp.root}/nope.py": not found', "FS_NOT_FOUND")
    (lsp.ws / "bin.py").write_bytes(b"\x00\x01\x02")
    message, code = await lsp.fail(operation="hover", file_path="bin.py", line=1, character=1)
    assert code == "FS_NOT_TEXT"
    (lsp.ws / "dir.py").mkdir()
    message, code = await lsp.fail(operation="hover", file_path="dir.py", line=1, character=1)
    assert code == "FS_NOT_REGULAR_FILE"


async def test_unknown_extension_has_no_provider(lsp: Lsp) -> None:
    assert await lsp.fail(operation="hover", file_path="notes.txt", line=1, character=1) == (
        'no LSP provider handles "notes.txt"',
        "LSP_UNAVAILABLE",
    )


async def test_workspace_gone(tmp_path: Path) -> None:
    ws = tmp_path / "gone"
    ws.mkdir()
    async with LspManager([]) as manager:
        lsp = Lsp(ws, tmp_path, manager)
        ws.rmdir()
        assert await lsp.fail(operation="hover", file_path="a.py", line=1, character=1) == (
            "the lsp tool requires a session workspace cwd",
            "LSP_WORKSPACE_REQUIRED",
        )


def test_default_servers_find_jedi_next_to_the_interpreter() -> None:
    [jedi] = [s for s in default_servers() if s.name == "jedi-language-server"]
    assert jedi.command == (os.path.join(os.path.dirname(sys.executable), "jedi-language-server"),)
    assert jedi.handles("x/y.PY") and not jedi.handles("y.pyc")
    assert default_servers(python_command=[]) == [
        s for s in default_servers() if s.name != "jedi-language-server"
    ]
    assert all(
        s.name != "typescript-language-server"
        for s in default_servers(typescript_command=["/nonexistent/tsls", "--stdio"])
    )


# -- a scripted real server: protocol and failure paths ---------------------------------------


async def test_server_requests_are_answered_and_hover_lists_flattened(
    lsp: Lsp, tmp_path: Path
) -> None:
    (lsp.ws / "a.fake").write_text("hello")
    value, shown = await lsp.ok(operation="hover", file_path="a.fake", line=1, character=1)
    assert value == {"kind": "hover", "hover": {"contents": "plain part\n\n```python\nx = 1\n```"}}
    assert shown == value["hover"]["contents"]
    log = _fake_log(tmp_path)
    assert log[0] == {
        "configuration": [None],
        "progress": None,
        "rootUri": lsp.root.as_uri(),
    }
    uri = (lsp.root / "a.fake").as_uri()
    assert log[1] == {"didOpen": uri, "languageId": "fake"}
    # Unchanged: no didChange; changed: one, with the next version.
    await lsp.ok(operation="hover", file_path="a.fake", line=1, character=1)
    (lsp.ws / "a.fake").write_text("hello again")
    await lsp.ok(operation="hover", file_path="a.fake", line=1, character=1)
    assert [e for e in _fake_log(tmp_path) if "didChange" in e] == [
        {"didChange": uri, "version": 2}
    ]


async def test_a_server_error_response_is_reported(lsp: Lsp) -> None:
    (lsp.ws / "a.fake").write_text("hello")
    assert await lsp.fail(operation="goToDefinition", file_path="a.fake", line=1, character=1) == (
        'language server "fake" failed textDocument/definition: no',
        "LSP_SERVER_ERROR",
    )


async def test_a_crash_fails_the_call_and_the_next_call_restarts(lsp: Lsp) -> None:
    (lsp.ws / "a.fake").write_text("CRASH")
    message, code = await lsp.fail(operation="hover", file_path="a.fake", line=1, character=1)
    assert code == "LSP_SERVER_ERROR"
    assert message == (
        'language server "fake" exited with code 3 during textDocument/hover '
        "(stderr: fake server: crashing on purpose); it will be restarted on the next call"
    )
    [dead] = lsp.manager.running()
    (lsp.ws / "a.fake").write_text("fine now")
    value, _ = await lsp.ok(operation="hover", file_path="a.fake", line=1, character=1)
    assert value["hover"] is not None
    [fresh] = lsp.manager.running()
    assert fresh.pid != dead.pid


@pytest.mark.parametrize(
    ("trigger", "why"),
    [
        ("DEEP", "invalid JSON"),
        ("HUGE", "a 99999999999-byte message (limit 67108864)"),
    ],
)
async def test_hostile_frames_end_only_that_connection(lsp: Lsp, trigger: str, why: str) -> None:
    (lsp.ws / "a.fake").write_text(trigger)
    message, code = await lsp.fail(operation="hover", file_path="a.fake", line=1, character=1)
    assert code == "LSP_SERVER_ERROR"
    assert message.startswith('language server "fake" ')
    assert "it will be restarted on the next call" in message
    [server] = lsp.manager.running()
    assert server.connection.lost is not None and why in str(server.connection.lost)
    # The host (and the other server's tasks) carry on; the next call gets a fresh server.
    (lsp.ws / "a.fake").write_text("calm")
    value, _ = await lsp.ok(operation="hover", file_path="a.fake", line=1, character=1)
    assert value["hover"] is not None
    [fresh] = lsp.manager.running()
    assert fresh.pid != server.pid and not alive(server.pid)


def test_kill_all_servers_is_the_atexit_sweep(ws: Path, tmp_path: Path) -> None:
    async def main() -> int:
        async with LspManager([_fake_spec(tmp_path)], open_settle_s=1.0) as manager:
            lsp = Lsp(ws, tmp_path, manager)
            (ws / "a.fake").write_text("hello")
            await lsp.ok(operation="hover", file_path="a.fake", line=1, character=1)
            [server] = manager.running()
            kill_all_servers()  # what atexit runs when a host exits without a teardown
            await server.process.wait()
            assert server.process.returncode == -signal.SIGKILL
            return server.pid

    assert not alive(anyio.run(main))


async def test_a_hanging_request_is_bounded(ws: Path, tmp_path: Path) -> None:
    async with LspManager(
        [_fake_spec(tmp_path)], request_timeout_s=0.5, open_settle_s=1.0
    ) as manager:
        lsp = Lsp(ws, tmp_path, manager)
        (ws / "a.fake").write_text("HANG")
        assert await lsp.fail(operation="hover", file_path="a.fake", line=1, character=1) == (
            'language server "fake" did not answer hover within 0.5 s',
            "LSP_TIMEOUT",
        )
        # The server is still usable afterwards (the late request was cancelled, not fatal).
        (ws / "a.fake").write_text("ok")
        value, _ = await lsp.ok(operation="hover", file_path="a.fake", line=1, character=1)
        assert value["hover"] is not None
        pids = [s.pid for s in manager.running()]
    assert await all_gone(pids)


async def test_a_flood_of_stderr_does_not_block(lsp: Lsp) -> None:
    (lsp.ws / "a.fake").write_text("BIG")
    value, _ = await lsp.ok(operation="hover", file_path="a.fake", line=1, character=1)
    assert value["hover"] is not None
    [server] = lsp.manager.running()
    assert sum(len(chunk) for chunk in server.stderr_tail) < 200_000


async def test_the_shutdown_handshake_runs_at_teardown(ws: Path, tmp_path: Path) -> None:
    env = {**os.environ, "FAKE_LSP_LOG": str(tmp_path / "fake.log")}
    async with LspManager([_fake_spec(tmp_path)], env=env, open_settle_s=1.0) as manager:
        lsp = Lsp(ws, tmp_path, manager)
        (ws / "a.fake").write_text("hello")
        await lsp.ok(operation="hover", file_path="a.fake", line=1, character=1)
    assert _fake_log(tmp_path)[-2:] == [{"shutdown": True}, {"exit": True}]


# -- rendering (pure) and the card ---------------------------------------------------------


def test_render_caps_paths_and_uris() -> None:
    root = "file:///w/proj"
    locs = [_loc(f"file:///w/proj/src/f{i % 3}.py", i, 0, 1) for i in range(150)]
    value = {"kind": "locations", "locations": locs, "resolvedWorkspaceUri": root}
    [block] = render_lsp({}, value)
    lines = block["text"].split("\n")
    assert len(lines) == 101
    assert lines[-1] == "… 50 more location(s) omitted (limit 100)."
    assert lines[0] == "src/f0.py:1:1" and lines[1] == "src/f0.py:4:1"
    assert lines[50] == "src/f1.py:2:1"  # grouped: all of f0 (50) first, then f1
    mixed = {
        "kind": "locations",
        "locations": [
            _loc("file:///usr/lib/python3/os.py", 9, 2, 3),
            _loc("file:///w/proj/a%20b.py", 0, 0, 1),
            _loc("jdt://contents/x.class", 1, 1, 2),
            _loc("file:///w/project2/c.py", 0, 0, 1),
        ],
        "resolvedWorkspaceUri": root,
    }
    assert render_lsp({}, mixed)[0]["text"] == (
        "/usr/lib/python3/os.py:10:3\na b.py:1:1\njdt://contents/x.class:2:2\n/w/project2/c.py:1:1"
    )
    empty = {"kind": "locations", "locations": [], "resolvedWorkspaceUri": root}
    assert render_lsp({}, empty)[0]["text"] == "No results."
    long = "\U0001f600" * 9000  # 18000 UTF-16 units
    [block] = render_lsp({}, {"kind": "hover", "hover": {"contents": long}})
    assert block["text"] == "\U0001f600" * 8000 + ("\n… hover truncated (limit 16000 characters).")
    many = {
        "kind": "locations",
        "locations": [_loc("file:///" + "d/" * 100 + f"f{i}.py", 0, 0, 1) for i in range(99)],
        "resolvedWorkspaceUri": root,
    }
    text = render_lsp({}, many)[0]["text"]
    assert text.endswith("\n… locations truncated (limit 16000 characters).")
    assert len(text) == 16000 + len("\n… locations truncated (limit 16000 characters).")


def test_tool_definition(tmp_path: Path) -> None:
    ws = tmp_path / "w"
    ws.mkdir()
    tool = build_lsp_tool(_cfg(ws, tmp_path), LspManager([]))
    entry = catalog_entry("lsp")
    assert tool.name == "lsp" and tool.description == entry["description"]
    assert tool.parameters == entry["parameters"]
    assert tool.timeout_ms == 60000
    args = {"operation": "hover", "file_path": "src/a.py", "line": 3, "character": 14}
    assert tool.is_concurrency_safe is not None and tool.is_concurrency_safe(args)
    assert tool.present_call is not None
    assert tool.present_call(args)["title"] == "LSP hover src/a.py:3:14"


# -- programs in both languages --------------------------------------------------------------


async def _run_program(lsp: Lsp, runtime: Any, code: str) -> Any:
    rt = ToolRuntime(mode="code", code_runtime=runtime)
    rt.register(build_lsp_tool(_cfg(lsp.ws, lsp.ws.parent), lsp.manager))
    agent = rt.scope("agent", session=MemorySessionLog())
    result = await rt.execute(
        ToolExecutionInput(
            call_id="run-1",
            name="run_code",
            arguments={"code": code, "description": "Navigate the code"},
            signal=AbortController().signal,
            agent=agent,
        )
    )
    assert not result.is_error, result.to_json()
    return result.value["result"]


async def test_python_program_calls_lsp(lsp: Lsp) -> None:
    code = """
d = await tools.lsp({'operation': 'goToDefinition', 'file_path': 'pkg/b.py', 'line': 3, 'character': 7})
h = await tools.lsp({'operation': 'hover', 'file_path': 'pkg/b.py', 'line': 3, 'character': 7})
try:
    await tools.lsp({'operation': 'hover', 'file_path': 'notes.txt', 'line': 1, 'character': 1})
except ToolCallError as e:
    err = [e.code, e.message]
return {'uri': d['locations'][0]['uri'], 'start': d['locations'][0]['range']['start'],
        'hover': 'Say hello' in h['hover']['contents'], 'err': err}
"""
    async with PythonRuntime(Limits(max_compute_ms=10_000, max_wall_ms=30_000)) as runtime:
        value = await _run_program(lsp, runtime, code)
    assert value == {
        "uri": (lsp.root / "pkg" / "a.py").as_uri(),
        "start": {"line": 0, "character": 4},
        "hover": True,
        "err": ["LSP_UNAVAILABLE", 'no LSP provider handles "notes.txt"'],
    }


async def test_typescript_program_calls_lsp(lsp: Lsp) -> None:
    code = """
const refs = await tools.lsp({operation: 'findReferences', file_path: 'pkg/a.py', line: 1, character: 5});
const h = await tools.lsp({operation: 'hover', file_path: 'pkg/b.py', line: 2, character: 1});
return {kind: refs.kind, n: refs.locations.length, ws: refs.resolvedWorkspaceUri, hover: h.hover};
"""
    async with TypeScriptRuntime(Limits(max_compute_ms=10_000, max_wall_ms=30_000)) as runtime:
        value = await _run_program(lsp, runtime, code)
    assert value == {
        "kind": "locations",
        "n": 4,
        "ws": lsp.root.as_uri(),
        "hover": None,
    }
