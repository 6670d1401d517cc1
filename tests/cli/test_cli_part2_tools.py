"""`codemode run` composes catalog part 2: one program per language drives a terminal, fetches
from a loopback server (allowed through the environment) and asks the language server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

PYTHON_PROGRAM = """
opened = await tools.terminal_open({"type": "shell", "name": "main"})
sid = opened["sessionId"]
sent = await tools.terminal_send({"sessionId": sid, "text": "echo $((6 * 7))"})
page = await tools.web_fetch({"url": URL})
where = await tools.lsp({"operation": "goToDefinition", "file_path": "app.py", "line": 3, "character": 8})
listed = await tools.terminal_list({})
closed = await tools.terminal_close({"sessionId": sid})
return {
    "viewport": sent["viewport"],
    "wait": sent["waitReason"],
    "status": page["statusCode"],
    "body": page["body"],
    "definition": where["locations"][0],
    "listed": [s["sessionId"] for s in listed],
    "closed": closed["outcome"],
}
"""

TYPESCRIPT_PROGRAM = """
const opened = await tools.terminal_open({ type: "shell" });
const sid = opened.sessionId;
const sent = await tools.terminal_send({ sessionId: sid, text: "echo $((6 * 7))" });
const page = await tools.web_fetch({ url: URL });
const where = await tools.lsp({ operation: "goToDefinition", file_path: "app.py", line: 3, character: 8 });
const closed = await tools.terminal_close({ sessionId: sid });
return {
  viewport: sent.viewport,
  wait: sent.waitReason,
  status: page.statusCode,
  body: page.body,
  definition: where.locations[0],
  listed: [sid],
  closed: closed.outcome,
};
"""


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<html><body><h1>Hello</h1><p>from loopback</p></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(5)


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "lib.py").write_text("def answer():\n    return 42\n", encoding="utf-8")
    (ws / "app.py").write_text("from lib import answer\n\nprint(answer())\n", encoding="utf-8")
    return ws


def _run(
    program: str, lang: str, ws: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codemode.cli", "run", "-", "--lang", lang, "-w", str(ws), "--json"],
        input=program,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
    )


@pytest.mark.parametrize("lang", ["python", "typescript"])
def test_a_program_drives_a_terminal_the_web_and_a_language_server(
    lang: str, tmp_path: Path, server: ThreadingHTTPServer
) -> None:
    ws = _workspace(tmp_path)
    url = f"http://127.0.0.1:{server.server_address[1]}/page"
    template = PYTHON_PROGRAM if lang == "python" else TYPESCRIPT_PROGRAM
    program = (
        f"URL = {json.dumps(url)}\n" if lang == "python" else f"const URL = {json.dumps(url)};\n"
    )
    proc = _run(program + template, lang, ws, {"CODEMODE_WEB_ALLOW_HOSTS": "127.0.0.1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    value = json.loads(proc.stdout)["value"]["result"]
    assert "42" in value["viewport"]
    assert value["wait"] in ("stdin_read", "inferred_idle")
    assert value["status"] == 200
    assert value["body"]["kind"] == "html"
    assert "from loopback" in value["body"]["content"]
    definition = value["definition"]
    assert definition["uri"] == (ws / "lib.py").resolve().as_uri()
    # Zero-based in the value: `def answer` is line 0, the name starts at column 4.
    assert definition["range"]["start"] == {"line": 0, "character": 4}
    assert len(value["listed"]) == 1
    assert value["closed"] == "closed"


def test_loopback_is_refused_without_the_allowance(
    tmp_path: Path, server: ThreadingHTTPServer
) -> None:
    ws = _workspace(tmp_path)
    url = f"http://127.0.0.1:{server.server_address[1]}/page"
    program = f"return await tools.web_fetch({{'url': {json.dumps(url)}}})"
    env = {k: "" for k in ("CODEMODE_WEB_ALLOW_HOSTS", "CODEMODE_WEB_ALLOW_CIDRS")}
    proc = _run(program, "python", ws, {**env, "CODEMODE_WEB_ALLOW_PRIVATE": ""})
    assert proc.returncode == 1
    error = json.loads(proc.stdout)["error"]
    assert "127.0.0.1" in error["message"]


def test_the_persistent_bash_keeps_state_across_calls(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    (ws / "sub").mkdir()
    program = (
        "await tools.bash({'command': 'cd sub && export GREETING=hi'})\n"
        "return await tools.bash({'command': 'echo $GREETING from $(basename $PWD)'})"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "codemode.cli",
            "run",
            "-",
            "-w",
            str(ws),
            "--json",
            "--bash",
            "persistent",
        ],
        input=program,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The persistent bash's value has the one-shot bash's shape.
    assert json.loads(proc.stdout)["value"]["result"]["stdout"]["text"] == "hi from sub"


def _descendants(pid: int) -> dict[int, str]:
    """Live descendants of ``pid``: pid -> command line."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: dict[int, str] = {}
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            try:
                with open(f"/proc/{child}/cmdline", "rb") as fh:
                    found[child] = fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
            except OSError:
                continue
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(") ", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_language_servers_and_terminals_die_with_a_killed_host(tmp_path: Path) -> None:
    import signal
    import time

    ws = _workspace(tmp_path)
    (ws / "run.py").write_text(
        "await tools.lsp({'operation': 'hover', 'file_path': 'app.py', 'line': 3, 'character': 8})\n"
        "t = await tools.terminal_open({'type': 'shell'})\n"
        "await tools.terminal_send({'sessionId': t['sessionId'], 'text': 'sleep 300 &'})\n"
        "await tools.bash({'command': 'sleep 300', 'description': 'hold the run'})\n",
        encoding="utf-8",
    )
    host = subprocess.Popen(
        [sys.executable, "-m", "codemode.cli", "run", str(ws / "run.py"), "-w", str(ws)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        seen: dict[int, str] = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            seen.update(_descendants(host.pid))
            if any("jedi-language-server" in c for c in seen.values()) and any(
                "sleep 300" in c for c in seen.values()
            ):
                # Both the server and the terminal's background sleep run (and the bash call).
                if sum("sleep 300" in c for c in seen.values()) >= 2:
                    break
            time.sleep(0.1)
        assert any("jedi-language-server" in c for c in seen.values()), seen
        assert sum("sleep 300" in c for c in seen.values()) >= 2, seen
        host.send_signal(signal.SIGKILL)
        host.wait(10)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(_alive(p) for p in seen):
            time.sleep(0.1)
        assert [c for p, c in seen.items() if _alive(p)] == []
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(10)
