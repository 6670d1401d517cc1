"""``codemode COMMAND ...`` builds only COMMAND's parameters (cli/_app.py ``_app_for``),
and reads exactly as the whole application does: help, usage errors, the root options."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from codemode.cli._app import _app_for, app

COMMANDS = ["run", "sdk", "tools", "log", "agent", "serve-mcp", "bench"]
ARGS = [
    *([name, "--help"] for name in COMMANDS),
    *([name, "--no-such-option"] for name in COMMANDS),
    ["agent"],
    ["run", "--lang", "cobol", "x.py"],
    ["log"],
]


def test_each_command_is_found_alone() -> None:
    for name in COMMANDS:
        alone = _app_for([name, "--help"])
        assert alone is not app
        assert len(alone.registered_commands) == 1
    assert len(app.registered_commands) == len(COMMANDS)  # the whole app is untouched


@pytest.mark.parametrize("args", [[], ["--help"], ["--version"], ["nope"], ["agen"], ["--x"]])
def test_anything_else_runs_the_whole_application(args: list[str]) -> None:
    assert _app_for(args) is app


@pytest.mark.parametrize("args", ARGS, ids=" ".join)
def test_a_command_alone_reads_as_in_the_whole_application(args: list[str]) -> None:
    runner = CliRunner()
    whole = runner.invoke(app, args, prog_name="codemode", env={"COLUMNS": "100"})
    alone = runner.invoke(_app_for(args), args, prog_name="codemode", env={"COLUMNS": "100"})
    assert (alone.exit_code, alone.output) == (whole.exit_code, whole.output)
    assert whole.output  # something was compared
