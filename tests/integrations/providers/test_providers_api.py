"""The integration packages' public surface: sorted ``__all__``, documented names, and
importing the adapters pulls in no provider SDK."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest


@pytest.mark.parametrize("name", ["codemode.integrations.providers", "codemode.integrations.otel"])
def test_all_is_sorted_and_documented(name: str) -> None:
    module = importlib.import_module(name)
    assert list(module.__all__) == sorted(module.__all__)
    for attr in module.__all__:
        obj = getattr(module, attr)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"{name}.{attr} has no docstring"


def test_the_adapters_import_no_sdk() -> None:
    probe = (
        "import sys, codemode.integrations.providers\n"
        "bad = [m for m in ('openai', 'anthropic', 'pydantic', 'opentelemetry') if m in sys.modules]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
