"""What of the host's environment a command sees: by default an allow-list (the host's API
keys, tokens and passwords stay out), by name on request, or everything with
``bash_env="inherit"`` — for one-shot ``bash``, its background jobs, the persistent ``bash``
and the terminals. Real processes throughout."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode.tools import JobManager, default_tools
from codemode.tools.shell import PASS_THROUGH
from codemode.tools.terminal import TerminalManager
from tests.tools.conftest import Harness, text_of

pytestmark = pytest.mark.anyio

SECRETS = {
    "OPENAI_API_KEY": "sk-test-openai",
    "GITHUB_TOKEN": "ghp-test-token",
    "DATABASE_URL": "postgres://u:pw-test@db/x",  # no telltale name: an allow-list catches it
    "https_proxy": "http://u:pw-proxy@proxy:3128",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
}
PROBE = "echo ${OPENAI_API_KEY-unset} ${GITHUB_TOKEN-unset} ${DATABASE_URL-unset} ${https_proxy-unset} ${SSH_AUTH_SOCK-unset}; echo home=$HOME lc=$LC_TESTING path=${PATH:+set}"
ALL_UNSET = "unset unset unset unset unset"


@pytest.fixture(autouse=True)
def host_secrets(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LC_TESTING", "kept")
    monkeypatch.setenv("HOME", "/home/tester")
    yield


def sh(command: str, **extra: Any) -> dict[str, Any]:
    return {"command": command, "description": "Probe the environment", **extra}


async def one_shot(harness: Harness) -> list[str]:
    result = await harness.ok("bash", sh(PROBE))
    return str(result.value["stdout"]["text"]).splitlines()


async def test_one_shot_bash_sees_only_the_allow_list(workspace: Path, output_dir: Path) -> None:
    lines = await one_shot(Harness(workspace, output_dir))
    assert lines == [ALL_UNSET, "home=/home/tester lc=kept path=set"]
    full = await Harness(workspace, output_dir).ok("bash", sh("env"))
    names = {line.split("=", 1)[0] for line in full.value["stdout"]["text"].splitlines()}
    managed = {n for n in names if n.startswith("DSH_")}
    # bash adds PWD, SHLVL and _ itself.
    assert names - managed - {"PWD", "SHLVL", "_"} <= PASS_THROUGH | {"LC_TESTING"}


async def test_named_variables_and_inherit_pass_through(workspace: Path, output_dir: Path) -> None:
    named = Harness(workspace, output_dir, bash_env=["GITHUB_TOKEN", "https_proxy"])
    assert (await one_shot(named))[
        0
    ] == "unset ghp-test-token unset http://u:pw-proxy@proxy:3128 unset"
    inherit = Harness(workspace, output_dir, bash_env="inherit")
    assert (await one_shot(inherit))[0] == " ".join(SECRETS.values())
    # ``env`` is the host's explicit choice: added whatever the policy.
    extra = Harness(workspace, output_dir, env={"OPENAI_API_KEY": "sk-chosen"})
    assert (await one_shot(extra))[0] == "sk-chosen unset unset unset unset"


def test_bad_policies_are_refused(workspace: Path, output_dir: Path) -> None:
    for bad, message in (
        ("everything", "bash_env must be"),
        ({"A": "1"}, "bash_env must be"),
        (["OK", "BAD=1"], "invalid environment variable name"),
        ([""], "invalid environment variable name"),
    ):
        with pytest.raises(ValueError, match=message):
            default_tools(workspace, output_dir=output_dir, bash_env=bad)  # type: ignore[arg-type]


async def test_background_jobs_are_scrubbed(
    workspace: Path, output_dir: Path, tmp_path: Path
) -> None:
    async with JobManager(output_dir=tmp_path / "jobs") as jobs:
        for policy, first in (("scrubbed", ALL_UNSET), ("inherit", " ".join(SECRETS.values()))):
            harness = Harness(workspace, output_dir, jobs=jobs, bash_env=policy)
            started = await harness.ok("bash", sh(PROBE, run_in_background=True))
            job_id = started.value["jobId"]
            out = await harness.ok("job_output", {"job_id": job_id, "wait": True})
            assert text_of(out).splitlines()[0] == first, text_of(out)


@pytest.fixture
async def terminals(tmp_path: Path) -> AsyncIterator[TerminalManager]:
    async with TerminalManager(work_dir=tmp_path / "terms") as manager:
        yield manager


async def test_the_persistent_bash_is_scrubbed(
    workspace: Path, output_dir: Path, terminals: TerminalManager
) -> None:
    for policy, first in (("scrubbed", ALL_UNSET), ("inherit", " ".join(SECRETS.values()))):
        harness = Harness(
            workspace, output_dir, terminals=terminals, bash="persistent", bash_env=policy
        )
        result = await harness.ok("bash", {"command": PROBE})
        lines = text_of(result).splitlines()
        assert lines == [first, "home=/home/tester lc=kept path=set"], lines


async def test_terminals_are_scrubbed(
    workspace: Path, output_dir: Path, terminals: TerminalManager
) -> None:
    harness = Harness(workspace, output_dir, terminals=terminals)
    opened = await harness.ok("terminal_open", {"type": "shell"})
    sid = opened.value["sessionId"]
    sent = await harness.ok(
        "terminal_send", {"sessionId": sid, "text": "echo v=${OPENAI_API_KEY-unset}"}
    )
    rendered = text_of(sent)
    assert "v=unset" in rendered and "sk-test-openai" not in rendered
