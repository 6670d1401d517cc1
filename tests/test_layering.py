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


def _absolute_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
    return found


def _imports(path: Path) -> set[str]:
    """The first-party packages ``path`` imports, named by folder (``codemode.engine`` -> engine)."""
    found: set[str] = set()
    for name in _absolute_imports(path):
        parts = name.split(".")
        if parts[0] == "codemode" and len(parts) > 1:
            found.add(parts[1])
    return found & FIRST_PARTY


def _source_files() -> list[Path]:
    files = [p for package in ALLOWED for p in (ROOT / package).rglob("*.py")]
    return sorted(files + list((ROOT / "codemode").rglob("*.py")))


def test_nothing_imports_the_folders_as_top_level_packages() -> None:
    # Installed, the folders are codemode.engine, codemode.sandbox, ...; a bare ``engine``
    # import would work only from a checkout (and would collide with a host's own package).
    roots = [ROOT / "benchmarks", ROOT / "examples", ROOT / "tests", ROOT / "codemode"]
    files = _source_files() + [p for r in roots for p in r.rglob("*.py")]
    bad = [
        f"{f.relative_to(ROOT)} imports {name}"
        for f in files
        if "golden" not in f.parts and "ts_corpus" not in f.parts
        for name in _absolute_imports(f)
        if name.split(".")[0] in FIRST_PARTY
    ]
    assert bad == []


def test_pyproject_lists_every_package_folder() -> None:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = config["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    found = {"codemode"}
    for folder in ALLOWED:
        assert setuptools["package-dir"][f"codemode.{folder}"] == folder
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT).parts
            found.add(".".join(("codemode", *rel)))
    assert listed == found


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

    stdlib = set(sys.stdlib_module_names) | {"__future__"}
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
