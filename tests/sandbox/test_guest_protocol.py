"""Every guest module satisfies the worker's ``Guest`` protocol."""

from __future__ import annotations

import importlib

import pytest

from codemode.sandbox import PythonRuntime, TypeScriptRuntime
from codemode.sandbox.worker._guest import Guest, load_guest

GUESTS = [
    *PythonRuntime.guest_modules.values(),
    *TypeScriptRuntime.guest_modules.values(),
    "codemode.sandbox.worker._raw_guest",
]


@pytest.mark.parametrize("name", GUESTS)
def test_guest_modules_satisfy_the_protocol(name: str) -> None:
    module = importlib.import_module(name)
    assert isinstance(module, Guest)
    assert load_guest(name) is module


def test_a_module_that_is_not_a_guest_is_refused() -> None:
    with pytest.raises(TypeError, match="is not a sandbox guest"):
        load_guest("codemode.sandbox.worker._frames")
