"""``ralph``: fresh children per round, a bounded report across rounds, the three stops."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from codemode.agent import (
    Agent,
    build_ralph_tool,
    parse_report,
)
from tests.agent.harness import agent_tree, tool_text
from tests.agent.model_server import Call, ModelServer, Reply, Status

pytestmark = pytest.mark.anyio


def _report(status: str, summary: str, blocker: str | None = None) -> Reply:
    body = {
        "status": status,
        "summary": summary,
        "evidence": [f"{summary} (checked)"],
        "nextSteps": [] if status == "complete" else ["keep going"],
        "blocker": blocker,
    }
    return Reply(text=[f"Worked.\n```json\n{json.dumps(body)}\n```"])


@contextlib.asynccontextmanager
async def _root(server: ModelServer, tmp_path: Path, **ralph: Any) -> AsyncIterator[Agent]:
    async with agent_tree(server, tmp_path, build_ralph_tool(**ralph)) as tree:
        yield tree.agent


def _ralph(**args: Any) -> Reply:
    return Reply(calls=[Call("r1", "ralph", [json.dumps(args)])])


def _result(server: ModelServer) -> str:
    return tool_text(server, "use ralph")


async def test_rounds_until_a_worker_reports_completion(tmp_path: Path) -> None:
    with ModelServer(
        [_ralph(objective="make the docs build", maxRounds=4), Reply(text=["done"])],
        by_prompt={
            "Ralph round 1 ": [_report("in_progress", "fixed the config")],
            "Ralph round 2 ": [_report("in_progress", "fixed two pages")],
            "Ralph round 3 ": [_report("complete", "the docs build")],
        },
    ) as server:
        async with _root(server, tmp_path) as agent:
            await agent.run("use ralph on the docs")
    text = _result(server)
    assert text.startswith("Ralph worker reported completion after 3 rounds.\nFinal report:\n")
    report = json.loads(text.split("Final report:\n", 1)[1])
    assert report["status"] == "complete" and report["summary"] == "the docs build"
    # Fresh children: no parent conversation, only the objective and the last report.
    second = server.requests_for("Ralph round 2 ")[0].messages
    assert [m["role"] for m in second] == ["system", "user"]
    assert "Objective:\nmake the docs build" in second[1]["content"]
    assert '"summary": "fixed the config"' in second[1]["content"]
    assert "use ralph on the docs" not in json.dumps(second)
    first = server.requests_for("Ralph round 1 ")[0].messages[1]["content"]
    assert "This is the first round" in first


async def test_a_concrete_blocker_stops_and_the_round_limit_stops(tmp_path: Path) -> None:
    with ModelServer(
        [_ralph(objective="deploy"), Reply(text=["blocked"])],
        by_prompt={"Ralph round 1 ": [_report("blocked", "no creds", blocker="no deploy key")]},
    ) as server:
        async with _root(server, tmp_path) as agent:
            await agent.run("use ralph to deploy")
    assert _result(server).startswith("Ralph worker reported a blocker after 1 round.")
    with ModelServer(
        [_ralph(objective="port it", maxRounds=2), Reply(text=["ok"])],
        by_prompt={
            "Ralph round 1 ": [_report("in_progress", "a")],
            # A "blocked" without a concrete blocker is not a stop.
            "Ralph round 2 ": [_report("blocked", "b", blocker="  ")],
        },
    ) as server:
        async with _root(server, tmp_path) as agent:
            await agent.run("use ralph to port")
    assert _result(server).startswith(
        "Ralph reached its 2 rounds limit; the worker reported work remaining."
    )


async def test_a_round_without_a_report_fails_with_the_last_handoff(tmp_path: Path) -> None:
    with ModelServer(
        [_ralph(objective="x"), Reply(text=["failed"])],
        by_prompt={
            "Ralph round 1 ": [_report("in_progress", "half")],
            "Ralph round 2 ": [Reply(text=["I forgot the report"])],
        },
    ) as server:
        async with _root(server, tmp_path) as agent:
            await agent.run("use ralph")
    text = _result(server)
    assert text.startswith(
        "Error: Ralph round 2 child failed before producing a structured report.\nLast handoff:\n"
    )
    assert '"summary": "half"' in text
    with ModelServer(
        [_ralph(objective="x"), Reply(text=["failed"])],
        by_prompt={"Ralph round 1 ": [Status(500)]},
    ) as server:
        async with _root(server, tmp_path) as agent:
            await agent.run("use ralph")
    text = _result(server)
    assert text.startswith("Error: Ralph round 1 child failed before producing a structured")
    assert "\nDiagnostic: " in text


async def test_arguments_and_the_deployment_ceiling(tmp_path: Path) -> None:
    with ModelServer(
        [_ralph(objective="x", maxRounds=50), Reply(text=["no"])],
    ) as server:
        async with _root(server, tmp_path, max_rounds=10) as agent:
            await agent.run("use ralph")
    assert _result(server) == "Error: maxRounds must be at most 10 (this deployment's ceiling)"


def test_parse_report_takes_the_last_valid_fenced_object_and_bounds_it() -> None:
    long = "y" * 5000
    answer = (
        '```json\n{"status": "complete", "summary": "old", "evidence": [], "nextSteps": [],'
        ' "blocker": null}\n```\nthen\n```json\n'
        + json.dumps(
            {
                "status": "in_progress",
                "summary": long,
                "evidence": ["e"] * 50,
                "nextSteps": [],
                "blocker": None,
            }
        )
        + "\n```"
    )
    report = parse_report(answer)
    assert report is not None and report["status"] == "in_progress"
    assert len(report["summary"]) == 2000 and len(report["evidence"]) == 20
    assert parse_report('{"status": "done", "summary": "x"}') is None
    assert parse_report("no json at all") is None
    # Nested past the JSON parser's recursion limit: no report, no crash.
    assert parse_report("[" * 100_000 + "]" * 100_000) is None
