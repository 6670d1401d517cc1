"""design.md's arrows: sdk_gen <- engine <- {sandbox, tools} <- cli; no upward imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# package -> first-party packages it may import
ALLOWED = {
    "sdk_gen": set(),
    "engine": {"sdk_gen"},
    "sandbox": {"engine"},
    "tools": {"engine"},
    "cli": {"engine", "sandbox", "tools", "sdk_gen"},
}
FIRST_PARTY = set(ALLOWED)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & FIRST_PARTY


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_follow_the_layering(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"{package} has no modules"
    violations = []
    for file in files:
        bad = _imports(file) - ALLOWED[package] - {package}
        if bad:
            violations.append(f"{file.relative_to(ROOT)} imports {sorted(bad)}")
    assert violations == []


def test_sdk_gen_uses_only_the_standard_library() -> None:
    import sys

    stdlib = set(sys.stdlib_module_names) | {"__future__", "sdk_gen"}
    for file in sorted((ROOT / "sdk_gen").rglob("*.py")):
        tree = ast.parse(file.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module.split(".")[0]]
            else:
                continue
            assert set(names) <= stdlib, f"{file.name} imports {names}"
