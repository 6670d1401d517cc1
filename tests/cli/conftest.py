"""Fixtures of the CLI tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `codemode agent` keeps its session folder and session index under the user's state
    # home: each test gets its own, so no test reads another's sessions (or the real one).
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
