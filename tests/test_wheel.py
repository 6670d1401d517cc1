"""The built wheel installs one top-level package, ``codemode``, and the README runs from it.

The repository keeps its folders at the top (``engine/``, ``sandbox/``, ...) and maps them
into the ``codemode`` namespace at build time, so what an embedder gets can differ from the
checkout the rest of the suite imports. These tests build the wheel from this checkout,
install it into a fresh virtual environment that cannot see the checkout, and run the
README's embedding example there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # The tree is copied first: building in place would leave build/ and *.egg-info in
    # the checkout. A fresh clone has no .git necessarily (CI copies the files), so the
    # copy leaves out what a clone would not hold rather than asking git.
    src = out / "src"
    shutil.copytree(
        ROOT,
        src,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
            ".mypy_cache", ".ruff_cache", ".hypothesis", ".codemode", "*.pyc",
        ),
    )  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "-w", str(out), str(src)],
        check=True,
        capture_output=True,
        timeout=300,
    )  # fmt: skip
    (found,) = out.glob("codemode-*.whl")
    return found


def test_the_wheel_installs_only_codemode_at_the_top_level(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    tops = {name.split("/", 1)[0] for name in names}
    dist_info = {t for t in tops if t.endswith(".dist-info")}
    assert tops - dist_info == {"codemode"}
    for package in ("engine", "sandbox", "tools", "sdk_gen", "cli"):
        assert f"codemode/{package}/__init__.py" in names
    # Package data travels with the code: the QuickJS prelude and the tool catalog.
    assert "codemode/sandbox/typescript/_prelude.js" in names
    assert "codemode/tools/_catalog.json" in names
    with zipfile.ZipFile(wheel) as archive:
        entry_points = archive.read(f"{sorted(dist_info)[0]}/entry_points.txt").decode()
    assert re.search(r"^codemode = codemode\.cli:main$", entry_points, re.M)


def _install(wheel: Path, tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A fresh venv holding the wheel: its python, its site-packages and the env to run it."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    # The dependencies come from the suite's own environment through a path entry; a path
    # added by a .pth line is not scanned for .pth files, so the checkout's editable
    # install (a .pth finder there) stays invisible.
    (site / "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return python, site, env


def test_the_readme_embedding_example_runs_from_the_wheel(wheel: Path, tmp_path: Path) -> None:
    python, site, env = _install(wheel, tmp_path)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Embedding\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match
    probe = "import codemode, sys\nprint(codemode.__file__)\n"
    proc = subprocess.run(
        [str(python), "-c", probe + match.group(1)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(str(site)), lines[0]
    assert lines[1] == "['run_code']"
    assert "[\n  0,\n  2,\n  4,\n  6,\n  8\n]" in proc.stdout
    # Nothing of the checkout was imported: no top-level engine/sandbox/tools exists there.
    check = subprocess.run(
        [str(python), "-c", "import importlib.util as u; print([n for n in "
         "('engine', 'sandbox', 'tools', 'sdk_gen', 'cli') if u.find_spec(n)])"],
        capture_output=True, text=True, cwd=tmp_path, env=env, check=True,
    )  # fmt: skip
    assert check.stdout.strip() == "[]"


def test_codemode_bench_runs_from_the_wheel(wheel: Path, tmp_path: Path) -> None:
    # The suites live in the package: no benchmarks/ folder is needed (or visible) here.
    python, site, env = _install(wheel, tmp_path)
    proc = subprocess.run(
        [
            str(python),
            "-m",
            "codemode.cli",
            "bench",
            "--suite",
            "roundtrip",
            "--runs",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert set(data) == {"env", "suites", "peers"}
    suite = data["suites"]["roundtrip"]
    assert suite["error"] is None
    assert {"codemode-python", "codemode-typescript"} <= {row["subject"] for row in suite["rows"]}
    # Peers may be missing from a bare install; whatever they are, they say so.
    assert all(v == "ok" or v.startswith("missing: ") for v in data["peers"].values())
    located = subprocess.run(
        [str(python), "-c", "import codemode.bench as b; print(b.__file__)"],
        capture_output=True, text=True, cwd=tmp_path, env=env, check=True,
    )  # fmt: skip
    assert located.stdout.startswith(str(site))
