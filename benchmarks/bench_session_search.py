"""``session_search`` over an FTS5 index vs scanning every session file, in one run.

Builds ``--sessions`` session files (default 200) of ``--events`` agent messages each
(default 200; words drawn from a fixed vocabulary, seeded) in one workspace, then measures:

- the first index build (``SessionStore.refresh`` on a cold index);
- a warm ``session_search`` through the full tool pipeline (a real ``Agent`` scope);
- the same search after one new event in one session (the incremental refresh);
- the floor without an index: read every file with ``SqliteSessionLog.read`` and look for
  the word in each message (what a store without FTS would do per query).

Usage: ``python benchmarks/bench_session_search.py [--sessions N] [--events M] [--runs R]``.
Prints medians and the ratio of the indexed search to the scan.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from codemode.agent import (
    Agent,
    ModelClient,
    ModelConfig,
    SessionStore,
    build_session_query_tools,
    new_session_info,
)
from codemode.engine import (
    AbortController,
    MemorySessionLog,
    SqliteSessionLog,
    ToolExecutionInput,
    ToolRuntime,
)

WORDS = (
    "build test deploy parser cache index query session agent schedule goal migrate "
    "refactor docs release branch merge commit review lint format type error warning"
).split()


def _populate(folder: Path, workspace: str, sessions: int, events: int, seed: int) -> None:
    rng = random.Random(seed)
    for n in range(sessions):
        info = new_session_info(title=f"session {n}", workspace=workspace)
        with SqliteSessionLog(folder / f"{info.id}.db") as log:
            log.append_now({"type": "agent/session", **_camel(info)})
            for i in range(events):
                words = " ".join(rng.choice(WORDS) for _ in range(30))
                if n == sessions // 2 and i == events // 2:
                    words += " zeppelin"
                role = "user" if i % 2 == 0 else "assistant"
                log.append_now(
                    {
                        "type": "agent/message",
                        "turn": 1 + i // 10,
                        "step": 1,
                        "at": info.created_at,
                        "message": {"role": role, "content": words},
                    }
                )


def _setup(root: Path, sessions: int, events: int) -> tuple[Path, str]:
    folder, workspace = root / "sessions", root / "ws"
    folder.mkdir()
    workspace.mkdir()
    _populate(folder, str(workspace), sessions, events, seed=7)
    return folder, str(workspace)


def _camel(info: Any) -> dict[str, Any]:
    return {
        "id": info.id,
        "title": info.title,
        "workspace": info.workspace,
        "parentId": info.parent_id,
        "createdAt": info.created_at,
    }


def _scan(folder: Path, word: str) -> int:
    hits = 0
    for path in folder.glob("ses-*.db"):
        for event in SqliteSessionLog.read(path):
            message = event.get("message")
            if isinstance(message, dict) and word in str(message.get("content", "")):
                hits += 1
                break
    return hits


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def main(sessions: int, events: int, runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-sessions-") as tmp:
        folder, workspace = _setup(Path(tmp), sessions, events)

        store = SessionStore(folder)
        started = time.perf_counter()
        store.refresh()
        build = time.perf_counter() - started

        rt = ToolRuntime(mode="native")
        for tool in build_session_query_tools(store):
            rt.register(tool)
        # The client is never asked: the benchmark calls the tool directly.
        client = ModelClient(ModelConfig("http://127.0.0.1:9/v1", "none"), api_key="x")
        agent = Agent(
            rt,
            rt.scope("bench", session=MemorySessionLog()),
            client,
            session=new_session_info(workspace=workspace),
        )

        async def search() -> str:
            result = await rt.execute(
                ToolExecutionInput(
                    call_id="q",
                    name="session_search",
                    arguments={"query": "zeppelin"},
                    signal=AbortController().signal,
                    agent=agent.scope,
                )
            )
            assert not result.is_error, result.error
            return str(result.content[0]["text"])

        assert (await search()).startswith("Session search results (1):")
        warm = []
        for _ in range(runs):
            t0 = time.perf_counter()
            await search()
            warm.append(time.perf_counter() - t0)

        target = next(folder.glob("ses-*.db"))
        incremental = []
        for i in range(runs):
            with SqliteSessionLog(target) as log:
                log.append_now(
                    {
                        "type": "agent/message",
                        "turn": 99,
                        "step": i,
                        "message": {"role": "user", "content": "more"},
                    }
                )
            t0 = time.perf_counter()
            await search()
            incremental.append(time.perf_counter() - t0)

        scans = []
        for _ in range(runs):
            t0 = time.perf_counter()
            assert _scan(folder, "zeppelin") == 1
            scans.append(time.perf_counter() - t0)

    total = sessions * (events + 1)
    print(f"session_search over {sessions} sessions × {events + 1} events ({total:,} events)")
    print(f"  first index build         {build * 1000:9.1f} ms  ({total / build:,.0f} events/s)")
    print(f"  warm search (tool)        {_median_ms(warm):9.2f} ms")
    print(f"  search after a new event  {_median_ms(incremental):9.2f} ms")
    print(f"  scan every file (floor)   {_median_ms(scans):9.2f} ms")
    print(f"  ratio warm search / scan  {statistics.median(warm) / statistics.median(scans):9.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--runs", type=int, default=7)
    ns = parser.parse_args()
    anyio.run(main, ns.sessions, ns.events, ns.runs)
