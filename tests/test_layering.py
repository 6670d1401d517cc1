"""The architecture's arrows, enforced: sdk_gen <- engine <- {sandbox, tools} <- {integrations, bench, agent} <- cli.

No upward import, no import of another package's private module, nothing host-side in the
worker-side folders, and ``pyproject.toml`` lists every package folder.
"""

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
    "integrations": {"engine", "sandbox", "tools", "sdk_gen"},
    "bench": {"engine", "sandbox", "tools", "sdk_gen"},
    "agent": {"engine", "sandbox", "tools", "sdk_gen"},
    "cli": {"engine", "sandbox", "tools", "sdk_gen", "integrations", "bench", "agent"},
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


def _private_cross_imports(path: Path, own: str) -> list[str]:
    """Imports in ``path`` (inside package ``own``) of another package's private module or name."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    bad: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            targets = [(node.module, alias.name) for alias in node.names]
        else:
            continue
        for module, name in targets:
            parts = module.split(".")
            if parts[0] != "codemode" or len(parts) < 2 or parts[1] == own:
                continue
            private = any(p.startswith("_") for p in parts[2:])
            if private or (name is not None and name.startswith("_")):
                shown = module if name is None else f"{module}.{name}"
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {shown}")
    return bad


def test_no_package_imports_another_packages_private_modules() -> None:
    # What one package needs of another is published (``codemode.engine.json``, names in
    # an ``__init__``); private modules may change without telling their neighbours.
    bad = [
        line
        for package in [*ALLOWED, "codemode"]
        for file in sorted((ROOT / package).rglob("*.py"))
        for line in _private_cross_imports(file, package)
    ]
    assert bad == []


# Modules that run inside the fork server and workers: they must not pull host-side code
# (anyio, the engine, the host half of the sandbox, tools, the CLI) into a worker.
WORKER_SIDE = ("sandbox/worker", "sandbox/python", "sandbox/typescript")
HOST_SIDE_PREFIXES = (
    "anyio",
    "codemode.engine",
    "codemode.sandbox.host",
    "codemode.tools",
    "codemode.cli",
)
# Root modules of the sandbox package a worker may use: pure data and constants.
WORKER_SAFE_ROOT = {"_limits", "_sdk_facts"}


def _resolve(path: Path, node: ast.ImportFrom) -> str:
    """The absolute module a relative import in ``path`` names."""
    rel = path.relative_to(ROOT).with_suffix("")
    # A module's package and an ``__init__``'s package are both its folder.
    package = ["codemode", *rel.parts[:-1]]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def test_worker_side_modules_import_nothing_host_side() -> None:
    bad: list[str] = []
    for folder in WORKER_SIDE:
        files = sorted((ROOT / folder).rglob("*.py"))
        assert files, folder
        for file in files:
            tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
            for node in ast.walk(tree):  # function-level imports count too
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    base = _resolve(file, node) if node.level else (node.module or "")
                    modules = [base] + [f"{base}.{alias.name}" for alias in node.names]
                else:
                    continue
                for module in modules:
                    parts = module.split(".")
                    host = module.startswith(HOST_SIDE_PREFIXES) and (
                        module in HOST_SIDE_PREFIXES
                        or module.startswith(tuple(p + "." for p in HOST_SIDE_PREFIXES))
                    )
                    root_module = (
                        parts[:2] == ["codemode", "sandbox"]
                        and len(parts) == 3
                        and parts[2].startswith("_")
                        and parts[2] not in WORKER_SAFE_ROOT
                    )
                    if host or root_module:
                        bad.append(f"{file.relative_to(ROOT)}:{node.lineno} imports {module}")
    assert bad == []
