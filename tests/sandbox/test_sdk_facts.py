"""The Python guest's surface the host states in the prompt (``sandbox/_sdk_facts.py``)
is a copy, kept so the host never imports the guest's modules: it must equal what those
modules define."""

from __future__ import annotations

import json
import subprocess
import sys

from codemode.sandbox import Limits
from codemode.sandbox._sdk_facts import python_surface, sdk_facts


def test_the_python_facts_are_the_guests_own_surface() -> None:
    modules, asyncio_names, lazy = python_surface()
    facts = sdk_facts("python", Limits())
    assert facts["modules"] == list(modules)
    assert facts["asyncio"] == list(asyncio_names)
    assert "gather" in asyncio_names and "sleep" in asyncio_names
    assert lazy is True
    assert facts["calls"].startswith("Tool calls are lazy coroutines")


def test_stating_the_facts_imports_no_guest_module() -> None:
    probe = (
        "import json, sys\n"
        "from codemode.sandbox import Limits, PythonRuntime, TypeScriptRuntime\n"
        "PythonRuntime(Limits()).sdk_facts(); TypeScriptRuntime(Limits()).sdk_facts()\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    loaded = set(json.loads(out.splitlines()[-1]))
    assert not {m for m in loaded if m.startswith("codemode.sandbox.python")}
    assert "RestrictedPython" not in loaded
