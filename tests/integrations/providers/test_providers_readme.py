"""The README's provider-adapter example runs and prints what it says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_readme_provider_example_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Provider adapters\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "no python block under Provider adapters"
    proc = subprocess.run(
        [sys.executable, "-c", match.group(1)], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "{'type': ['integer', 'null']}",
        "[{'role': 'tool', 'tool_call_id': 'call_1', 'content': '10 notes about otel'}]",
    ]
