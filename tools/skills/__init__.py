"""``skill``: a catalogue of ``SKILL.md`` folders from configured directories.

Layout:

- ``_catalog.py``: ``SkillCatalog`` (scan, refresh, safe loading, ``catalog_text()``).
- ``_tool.py``: ``build_skill_tool`` and the value's rendering.

The ``skill`` tool's description is the catalog's text byte for byte, so the list of
available skills reaches the model separately: a host puts ``catalog.catalog_text()`` (an
``<available_skills>`` block of names and descriptions, empty when there are none) into the
system prompt or a context message, and calls ``catalog.refresh()`` (then re-sends the text)
when skills may have been added or removed::

    catalog = SkillCatalog([project / ".skills", home / ".codemode/skills"])
    tool = build_skill_tool(cfg, catalog)
    system_prompt += "\\n\\n" + catalog.catalog_text()
"""

from .._errors import SkillError
from ._catalog import LoadedSkill, Skill, SkillCatalog, SkillDiagnostic, valid_skill_name
from ._tool import build_skill_tool, render_skill

__all__ = [
    "LoadedSkill",
    "Skill",
    "SkillCatalog",
    "SkillDiagnostic",
    "SkillError",
    "build_skill_tool",
    "render_skill",
    "valid_skill_name",
]
