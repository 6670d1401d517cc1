"""``skill`` and ``SkillCatalog``: scanning, loading, rendering, errors and refused tricks."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest

from codemode.engine import (
    AbortController,
    MemorySessionLog,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRuntime,
)
from codemode.tools._catalog import catalog_entry
from codemode.tools.skills import SkillCatalog, build_skill_tool, render_skill
from tests.tools.test_ask import error_of, make_cfg

pytestmark = pytest.mark.anyio
_ids = itertools.count(1)


def write_skill(
    root: Path,
    folder: str,
    body: str = "Do the thing.\n",
    *,
    name: str | None = None,
    description: str = "Does the thing.",
    extra: str = "",
) -> Path:
    directory = root / folder
    directory.mkdir(parents=True, exist_ok=True)
    front = f"---\nname: {name or folder}\ndescription: {description}\n{extra}---\n"
    (directory / "SKILL.md").write_text(front + body, encoding="utf-8")
    return directory


class Rig:
    def __init__(self, tmp_path: Path, catalog: SkillCatalog) -> None:
        self.rt = ToolRuntime()
        self.tool = build_skill_tool(make_cfg(tmp_path), catalog)
        self.rt.register(self.tool)
        self.agent = self.rt.scope("agent", session=MemorySessionLog())

    async def call(self, name: Any) -> ToolExecutionResult:
        return await self.rt.execute(
            ToolExecutionInput(
                call_id=f"skill-{next(_ids)}",
                name="skill",
                arguments={"name": name},
                signal=AbortController().signal,
                agent=self.agent,
            )
        )


async def test_load_value_and_render(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    folder = write_skill(
        root, "pdf-tools", "\n\nUse scripts/fill.py <form> & check.\n\n", description="Fill PDFs."
    )
    catalog = SkillCatalog([root])
    result = await Rig(tmp_path, catalog).call("pdf-tools")
    assert not result.is_error, result.to_json()
    real = str(folder.resolve())
    assert result.value == {
        "name": "pdf-tools",
        "provider": "filesystem",
        "resourceBase": {"kind": "directory", "path": real},
        "content": "Use scripts/fill.py <form> & check.",
    }
    assert result.content == [
        {
            "type": "text",
            "text": '<skill_content name="pdf-tools">\n<skill_resources>\n'
            f"Base directory for this skill: {real}\n"
            "Resolve relative paths mentioned by this skill against the base directory before "
            "using them. Load referenced resources only as needed.\n</skill_resources>\n\n"
            "<skill_instructions>\nUse scripts/fill.py <form> & check.\n</skill_instructions>\n"
            "</skill_content>",
        }
    ]


def test_render_escapes_attribute_and_hint_text() -> None:
    text = render_skill(
        {
            "name": 'a"<&b',
            "provider": "p",
            "resourceBase": {"kind": "directory", "path": "/x/<a&b>"},
            "content": "c",
        }
    )
    assert text.startswith('<skill_content name="a&quot;&lt;&amp;b">\n')
    assert "Base directory for this skill: /x/&lt;a&amp;b&gt;\n" in text
    url = render_skill(
        {
            "name": "n",
            "provider": "p",
            "resourceBase": {"kind": "url", "url": "https://x/?a&b"},
            "content": "",
        }
    )
    assert "Base URL for this skill: https://x/?a&amp;b\n" in url
    opaque = render_skill(
        {
            "name": "n",
            "provider": "p",
            "resourceBase": {"kind": "opaque", "description": "<db>"},
            "content": "",
        }
    )
    assert (
        "Resources for this skill: &lt;db&gt;\nLoad referenced resources only as needed.\n"
        in opaque
    )
    managed = render_skill({"name": "n", "provider": "hub&co", "content": ""})
    assert "managed by its provider (hub&amp;co)" in managed


async def test_errors(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "manual-only", extra="disable-model-invocation: true\n")
    write_skill(root, "going")
    catalog = SkillCatalog([root])
    rig = Rig(tmp_path, catalog)
    for bad in ["Bad", "a_b", "", "-a", "a--b", "x" * 65, "../etc"]:
        assert error_of(await rig.call(bad)) == (
            f'invalid skill name "{bad}"',
            "SKILL_INVALID_NAME",
        )
    assert error_of(await rig.call("nope")) == (
        'skill "nope" is unknown or no longer available',
        "SKILL_UNKNOWN",
    )
    assert error_of(await rig.call("manual-only")) == (
        'skill "manual-only" is not available for model invocation',
        "SKILL_NOT_INVOCABLE",
    )
    # Removed after the scan: no longer available (and the catalogue still lists it until
    # a refresh).
    (root / "going" / "SKILL.md").unlink()
    assert error_of(await rig.call("going"))[0] == 'skill "going" is unknown or no longer available'
    assert catalog.get("going") is not None
    catalog.refresh()
    assert catalog.get("going") is None


async def test_catalog_text_refresh_and_duplicates(tmp_path: Path) -> None:
    first, second = tmp_path / "project", tmp_path / "user"
    write_skill(first, "review", description="Review <diffs> & more.")
    write_skill(second, "review", description="The user's copy.")
    write_skill(second, "deploy", description="Deploy it.")
    write_skill(second, "hidden", extra="disable-model-invocation: true\n")
    catalog = SkillCatalog([first, second, tmp_path / "missing"])
    assert [s.name for s in catalog.skills] == ["deploy", "hidden", "review"]
    assert catalog.get("review").directory == str(first / "review")  # type: ignore[union-attr]
    assert [(Path(d.path).parent.name, d.message) for d in catalog.diagnostics] == [
        ("user", f'duplicate skill "review" ignored; {first / "review"} provides it')
    ]
    assert catalog.catalog_text() == (
        "<available_skills>\n"
        "<skill>\n<name>deploy</name>\n<description>Deploy it.</description>\n</skill>\n"
        "<skill>\n<name>review</name>\n<description>Review &lt;diffs&gt; &amp; more."
        "</description>\n</skill>\n"
        "</available_skills>"
    )
    write_skill(first, "added", description="New.")
    assert "added" not in catalog.catalog_text()
    catalog.refresh()
    assert "<name>added</name>" in catalog.catalog_text()
    assert SkillCatalog([tmp_path / "missing"]).catalog_text() == ""


def test_invalid_candidates_are_reported(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "mismatch", name="other")
    write_skill(root, "Upper")
    (root / "no-front").mkdir()
    (root / "no-front" / "SKILL.md").write_text("just text\n")
    (root / "unclosed").mkdir()
    (root / "unclosed" / "SKILL.md").write_text("---\nname: unclosed\n")
    (root / "bad-yaml").mkdir()
    (root / "bad-yaml" / "SKILL.md").write_text("---\nname: [unclosed\n---\n")
    (root / "deep-yaml").mkdir()
    (root / "deep-yaml" / "SKILL.md").write_text(
        "---\nname: " + "[" * 1000 + "]" * 1000 + "\n---\n"
    )
    (root / "tagged").mkdir()
    (root / "tagged" / "SKILL.md").write_text(
        "---\nname: !!python/object/apply:os.system ['touch pwned']\ndescription: x\n---\n"
    )
    write_skill(root, "no-desc", description='""')
    write_skill(root, "long-desc", description="x" * 1025)
    write_skill(root, "bad-flag", extra="disable-model-invocation: sometimes\n")
    (root / "empty").mkdir()
    (root / "latin1").mkdir()
    (root / "latin1" / "SKILL.md").write_bytes(b"---\nname: latin1\ndescription: caf\xe9\n---\n")
    (root / "README.md").write_text("not a skill folder")
    write_skill(root, ".hidden")
    catalog = SkillCatalog([root])
    assert catalog.skills == ()
    notes = {Path(d.path).name: d.message for d in catalog.diagnostics}
    assert notes["mismatch"].startswith('invalid skill name "other"')
    assert notes["Upper"].startswith('invalid skill name "Upper"')
    assert "does not open with YAML front matter" in notes["no-front"]
    assert "not closed" in notes["unclosed"]
    assert "not valid YAML" in notes["bad-yaml"] and "not valid YAML" in notes["deep-yaml"]
    assert "not valid YAML" in notes["tagged"]
    assert not (Path.cwd() / "pwned").exists()
    assert "non-empty description" in notes["no-desc"]
    assert "over 1024 characters" in notes["long-desc"]
    assert "true or false" in notes["bad-flag"]
    assert notes["empty"] == "no SKILL.md in the folder"
    assert notes["latin1"] == "SKILL.md is not valid UTF-8"
    assert set(notes) == {
        "mismatch", "Upper", "no-front", "unclosed", "bad-yaml", "deep-yaml", "tagged",
        "no-desc", "long-desc", "bad-flag", "empty", "latin1",
    }  # fmt: skip


async def test_links_fifos_hardlinks_and_huge_files_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    outside = tmp_path / "outside"
    secret = write_skill(outside, "secret", "SECRET INSTRUCTIONS\n")
    # A symlinked folder pointing outside the configured directory.
    (root).mkdir()
    (root / "secret").symlink_to(secret, target_is_directory=True)
    # A real folder whose SKILL.md is a symlink out.
    (root / "linked-file").mkdir()
    (root / "linked-file" / "SKILL.md").symlink_to(secret / "SKILL.md")
    # A hard link to a file elsewhere.
    (root / "hard").mkdir()
    write_skill(outside, "hard")
    os.link(outside / "hard" / "SKILL.md", root / "hard" / "SKILL.md")
    # A FIFO must not block the scan.
    (root / "fifo").mkdir()
    os.mkfifo(root / "fifo" / "SKILL.md")
    # Over the cap.
    write_skill(root, "huge", "x" * 5000)
    write_skill(root, "fine")
    catalog = SkillCatalog([root], max_bytes=4096)
    assert [s.name for s in catalog.skills] == ["fine"]
    notes = {Path(d.path).name: d.message for d in catalog.diagnostics}
    assert notes == {
        "secret": "symlinked skill folder refused",
        "linked-file": "SKILL.md is a symlink (refused)",
        "hard": "SKILL.md has several hard links (refused)",
        "fifo": "SKILL.md is not a regular file",
        "huge": f"SKILL.md is {(root / 'huge' / 'SKILL.md').stat().st_size} bytes; the limit is 4096",
    }
    rig = Rig(tmp_path, catalog)
    assert error_of(await rig.call("secret"))[1] == "SKILL_UNKNOWN"
    # Swapped for a symlink after the scan: the load refuses it too.
    fine = root / "fine"
    fine.rename(tmp_path / "fine-moved")
    fine.symlink_to(secret, target_is_directory=True)
    result = await rig.call("fine")
    assert error_of(result)[1] == "SKILL_UNKNOWN"
    assert "SECRET" not in str(result.to_json())
    # Grown over the cap after the scan.
    fine.unlink()
    write_skill(root, "fine")
    catalog.refresh()
    (fine / "SKILL.md").write_text("---\nname: fine\ndescription: d\n---\n" + "y" * 5000)
    assert error_of(await rig.call("fine")) == (
        f'skill "fine" is too large to load: SKILL.md is {(fine / "SKILL.md").stat().st_size} '
        "bytes; the limit is 4096",
        "SKILL_TOO_LARGE",
    )


async def test_disabled_after_the_scan_and_card_and_catalog(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "flip")
    catalog = SkillCatalog([root])
    rig = Rig(tmp_path, catalog)
    write_skill(root, "flip", extra="disable-model-invocation: true\n")
    assert error_of(await rig.call("flip"))[1] == "SKILL_NOT_INVOCABLE"
    assert rig.tool.present_call is not None
    assert rig.tool.present_call({"name": "flip"}) == {
        "card": "generic",
        "title": "Load skill flip",
        "kind": "read",
    }
    assert rig.tool.present_call({}) is None
    entry = catalog_entry("skill", "@deepseek-ai/dsh-tool-skill")
    assert (rig.tool.name, rig.tool.description, rig.tool.parameters) == (
        entry["name"],
        entry["description"],
        entry["parameters"],
    )
    assert rig.tool.is_concurrency_safe is None
