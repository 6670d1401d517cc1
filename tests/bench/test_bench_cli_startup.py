"""The start-up rows of ``codemode bench --suite startup`` (``bench/_cli_startup``): the
scripted loopback model server and a real ``codemode agent`` one-shot against it."""

from __future__ import annotations

import json
import os
import urllib.request

from codemode.bench._cli_startup import ScriptedModel, agent_one_shot, cli_environment, python_c
from codemode.bench._model import Row, SuiteResult
from codemode.bench._targets import apply_targets


def test_the_scripted_model_streams_one_text_reply() -> None:
    with ScriptedModel() as model:
        request = urllib.request.Request(
            model.base_url + "/chat/completions",
            data=json.dumps({"model": "m", "messages": [], "stream": True}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.headers["Content-Type"] == "text/event-stream"
            body = response.read().decode()
        assert len(model.arrived) == 1
    events = [line[len("data: ") :] for line in body.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["content"] == "done"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_an_agent_one_shot_is_timed_to_its_first_request_and_its_exit() -> None:
    with cli_environment() as (env, workspace):
        first, total = agent_one_shot(env, workspace)
        # Its session went to the temporary state directory, not the user's.
        sessions = os.path.join(env["XDG_STATE_HOME"], "codemode", "sessions")
        assert any(name.endswith(".db") for name in os.listdir(sessions))
        assert python_c("pass", env) > 0
    assert 0 < first < total


def test_the_start_up_targets_read_the_cli_rows() -> None:
    result = SuiteResult(description="startup", params={})
    for case, median in (("import codemode", 40.0), ("agent one-shot, to exit", 600.0)):
        row = Row(case=case, subject="codemode-cli", n=1, median=median, p95=median, p99=median)
        result.rows.append(row)
    apply_targets("startup", result)
    verdicts = {t.name: t.met for t in result.targets if t.subject == "codemode-cli"}
    assert verdicts == {
        "import codemode <= 100 ms": True,
        "codemode agent one-shot <= 0.5 s": False,
    }
