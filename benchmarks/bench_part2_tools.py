"""Catalog part 2 through the full pipeline, each against its floor in the same run.

- ``bash`` persistent vs one-shot vs ``bash -c`` spawned directly (``echo``): what a PTY
  shell kept per scope saves over a contained process per call;
- ``terminal_send`` of ``echo`` to an open shell (returns at the prompt: ``stdin_read``);
- ``web_fetch`` of a 200 KB HTML page from a loopback server vs a bare ``httpx`` GET (the
  difference is the destination checks, pinning and the HTML-to-Markdown rendering);
- ``lsp`` hover against jedi-language-server, warm (the first call, which starts the server,
  is reported apart).

Usage: ``python benchmarks/bench_part2_tools.py [--runs N]``. Prints medians and ratios.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx

from codemode.engine import AbortController, MemorySessionLog, ToolExecutionInput, ToolRuntime
from codemode.tools import JobManager, LspManager, TerminalManager, WebConfig, default_tools
from codemode.tools.web import DestinationPolicy

PAGE = (
    "<html><head><style>p{}</style></head><body>"
    + "".join(
        f"<h2>Section {i}</h2><p>Paragraph {i} with <b>bold</b> text.</p>" for i in range(2500)
    )
    + "</body></html>"
).encode()


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: Any) -> None:
        pass


async def _median_ms(runs: int, fn: Callable[[], Awaitable[Any]]) -> float:
    await fn()  # warm-up
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


async def main(runs: int) -> None:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}/page"
    ws = Path(tempfile.mkdtemp())
    state = Path(tempfile.mkdtemp())
    (ws / "lib.py").write_text("def answer():\n    return 42\n")
    (ws / "app.py").write_text("from lib import answer\n\nprint(answer())\n")
    async with (
        JobManager(output_dir=state / "jobs") as jobs,
        TerminalManager() as terminals,
        LspManager() as lsp,
    ):
        web = WebConfig(policy=DestinationPolicy.allowing(hosts=["127.0.0.1"]))
        common = dict(output_dir=state / "out", jobs=jobs, terminals=terminals, lsp=lsp, web=web)
        one_shot = ToolRuntime()
        persistent = ToolRuntime()
        for tool in default_tools(ws, **common):  # type: ignore[arg-type]
            one_shot.register(tool)
        for tool in default_tools(ws, bash="persistent", **common):  # type: ignore[arg-type]
            persistent.register(tool)
        agent_a = one_shot.scope("a", session=MemorySessionLog())
        agent_b = persistent.scope("b", session=MemorySessionLog())
        ids = iter(range(10**9))

        async def call(rt: ToolRuntime, agent: Any, name: str, args: dict[str, Any]) -> Any:
            result = await rt.execute(
                ToolExecutionInput(
                    call_id=f"c{next(ids)}",
                    name=name,
                    arguments=args,
                    signal=AbortController().signal,
                    agent=agent,
                )
            )
            assert not result.is_error, result.to_json()
            return result.value

        echo = {"command": "echo hi", "description": "echo"}
        direct = await _median_ms(
            runs,
            lambda: anyio.to_thread.run_sync(
                lambda: subprocess.run(["bash", "-c", "echo hi"], capture_output=True, check=True)
            ),
        )
        fresh = await _median_ms(runs, lambda: call(one_shot, agent_a, "bash", echo))
        kept = await _median_ms(
            runs, lambda: call(persistent, agent_b, "bash", {"command": "echo hi"})
        )
        opened = await call(one_shot, agent_a, "terminal_open", {"type": "shell"})
        sid = opened["sessionId"]
        send = await _median_ms(
            runs,
            lambda: call(one_shot, agent_a, "terminal_send", {"sessionId": sid, "text": "echo hi"}),
        )
        async with httpx.AsyncClient() as client:
            bare = await _median_ms(runs, lambda: client.get(url))
        fetched = await _median_ms(runs, lambda: call(one_shot, agent_a, "web_fetch", {"url": url}))
        hover = {"operation": "hover", "file_path": "app.py", "line": 3, "character": 8}
        start = time.perf_counter()
        await call(one_shot, agent_a, "lsp", hover)
        cold = (time.perf_counter() - start) * 1000
        warm = await _median_ms(runs, lambda: call(one_shot, agent_a, "lsp", hover))
    srv.shutdown()
    print(f"runs per figure: {runs} (median ms)")
    print(f"bash -c spawned directly     {direct:8.2f}")
    print(f"bash one-shot (pipeline)     {fresh:8.2f}   {fresh / direct:5.2f}x direct")
    print(
        f"bash persistent (pipeline)   {kept:8.2f}   {kept / direct:5.2f}x direct, {fresh / kept:5.2f}x faster than one-shot"
    )
    print(f"terminal_send echo           {send:8.2f}")
    print(f"httpx GET 200 KB (bare)      {bare:8.2f}")
    print(f"web_fetch 200 KB (pipeline)  {fetched:8.2f}   {fetched / bare:5.2f}x bare GET")
    print(f"lsp hover, first call        {cold:8.2f}   (starts jedi-language-server)")
    print(f"lsp hover, warm              {warm:8.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    anyio.run(main, parser.parse_args().runs)
