"""The skill catalogue: ``<dir>/<name>/SKILL.md`` folders under configured directories.

A skill is a folder whose ``SKILL.md`` opens with YAML front matter::

    ---
    name: pdf-tools                  # lowercase letters, digits, hyphens; equals the folder
    description: Fill and merge PDF forms.
    disable-model-invocation: true   # optional: listed for users, never loaded by the model
    ---
    (the instructions: the rest of the file)

Scanning (at construction and on ``refresh()``) reads every candidate's front matter; a
folder that does not qualify is left out and reported in ``diagnostics``: a symlinked folder
or ``SKILL.md`` (it could point anywhere, so it is refused rather than followed), a
``SKILL.md`` that is not a regular file or has several hard links, one over ``max_bytes``,
malformed front matter, an invalid or mismatched name, a duplicate name (the first directory
listed wins; within a directory folders are taken in name order). Loading re-reads the file
the same way, so the model gets the current instructions, or a clear error if the skill went
away.

SKILL codes: ``SKILL_INVALID_NAME``, ``SKILL_UNKNOWN``, ``SKILL_NOT_INVOCABLE``,
``SKILL_TOO_LARGE``.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from typing import Any

import msgspec

from .._errors import SkillError

__all__ = [
    "LoadedSkill",
    "Skill",
    "SkillCatalog",
    "SkillDiagnostic",
    "escape_attr",
    "escape_text",
    "valid_skill_name",
]

MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
DEFAULT_MAX_BYTES = 256 * 1024
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_FENCE = re.compile(r"^---[ \t]*$")
_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*$")


def valid_skill_name(name: object) -> bool:
    """Whether ``name`` is a skill name: 1-64 lowercase letters, digits and single hyphens."""
    return (
        isinstance(name, str) and len(name) <= MAX_NAME_CHARS and _NAME.fullmatch(name) is not None
    )


def escape_text(value: str) -> str:
    """``value`` escaped for XML-like text content (``& < >``)."""
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_attr(value: str) -> str:
    """``value`` escaped for a double-quoted XML-like attribute (``& " <``)."""
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


class Skill(msgspec.Struct, frozen=True, kw_only=True):
    """One catalogued skill (its front matter and where it lives)."""

    name: str
    description: str
    directory: str
    """The skill's folder (absolute, link-free): the base its relative paths resolve against."""
    model_invocable: bool = True


class LoadedSkill(msgspec.Struct, frozen=True, kw_only=True):
    """A skill as loaded for the model: its catalogue entry and its current instructions."""

    skill: Skill
    content: str


class SkillDiagnostic(msgspec.Struct, frozen=True, kw_only=True):
    """Why a candidate folder (or configured directory) was left out of the catalogue."""

    path: str
    message: str


class _Refused(Exception):
    pass


class _TooLarge(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


def _read_skill_md(folder: str, max_bytes: int) -> str:
    # O_NOFOLLOW on the folder and on SKILL.md: neither may be a symlink, so what is read is
    # a file inside the configured directory even if the folder is swapped mid-scan.
    # O_NONBLOCK keeps a FIFO planted as SKILL.md from blocking the open.
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        dir_fd = os.open(folder, flags | os.O_DIRECTORY)
    except OSError as exc:
        raise _Refused(f"cannot open the skill folder: {exc.strerror or exc}") from exc
    try:
        try:
            fd = os.open("SKILL.md", flags | os.O_NONBLOCK, dir_fd=dir_fd)
        except FileNotFoundError as exc:
            raise _Refused("no SKILL.md in the folder") from exc
        except OSError as exc:
            if os.path.islink(os.path.join(folder, "SKILL.md")):
                raise _Refused("SKILL.md is a symlink (refused)") from exc
            raise _Refused(f"cannot open SKILL.md: {exc.strerror or exc}") from exc
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise _Refused("SKILL.md is not a regular file")
            if st.st_nlink > 1:
                raise _Refused("SKILL.md has several hard links (refused)")
            if st.st_size > max_bytes:
                raise _TooLarge(st.st_size)
            # Read one byte past the cap: a file that grew after the fstat is caught too.
            chunks: list[bytes] = []
            remaining = max_bytes + 1
            while remaining > 0:
                chunk = os.read(fd, min(remaining, 65536))
                if not chunk:
                    break
                chunks.append(chunk)
                remaining -= len(chunk)
            data = b"".join(chunks)
            if len(data) > max_bytes:
                raise _TooLarge(len(data))
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Refused("SKILL.md is not valid UTF-8") from exc
    return text.removeprefix("\ufeff")


def _parse(text: str, folder_name: str) -> tuple[dict[str, Any], str]:
    lines = text.replace("\r\n", "\n").split("\n")
    if not lines or not _FENCE.match(lines[0]):
        raise _Refused("SKILL.md does not open with YAML front matter (---)")
    end = next((i for i in range(1, len(lines)) if _CLOSE.match(lines[i])), None)
    if end is None:
        raise _Refused("SKILL.md's front matter is not closed (---)")
    # Imported here: most sessions read no SKILL.md, and PyYAML costs ~18 ms to import.
    import yaml

    try:
        # safe_load: front matter is data; no tags that construct objects.
        meta = yaml.safe_load("\n".join(lines[1:end]))
    except Exception as exc:  # YAMLError, or RecursionError on absurd nesting
        raise _Refused(f"SKILL.md's front matter is not valid YAML: {type(exc).__name__}") from exc
    if not isinstance(meta, dict):
        raise _Refused("SKILL.md's front matter is not a mapping")
    name = meta.get("name")
    if not valid_skill_name(name) or name != folder_name:
        shown = name if isinstance(name, str) else repr(name)
        raise _Refused(
            f'invalid skill name "{_clip(shown)}" (lowercase letters, digits and hyphens, '
            f'equal to its folder "{_clip(folder_name)}")'
        )
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise _Refused("SKILL.md's front matter needs a non-empty description")
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise _Refused(f"the description is over {MAX_DESCRIPTION_CHARS} characters")
    disabled = meta.get("disable-model-invocation", False)
    if not isinstance(disabled, bool):
        raise _Refused("disable-model-invocation must be true or false")
    body = "\n".join(lines[end + 1 :]).lstrip("\n").rstrip()
    return meta, body


def _clip(value: str, limit: int = 80) -> str:
    return value if len(value) <= limit else value[:limit] + "…"


class SkillCatalog:
    """The skills found under ``directories`` (scanned now and on ``refresh()``).

    ``provider`` names the catalogue in loaded values (``{name, provider, ...}``);
    ``max_bytes`` caps a ``SKILL.md`` (256 KiB by default). ``catalog_text()`` is the list a
    host shows the model (the ``skill`` tool's description stays the catalog's text).
    """

    def __init__(
        self,
        directories: Iterable[str | os.PathLike[str]],
        *,
        provider: str = "filesystem",
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.directories: tuple[str, ...] = tuple(os.path.abspath(d) for d in directories)
        self.provider = provider
        self.max_bytes = max_bytes
        self._skills: dict[str, Skill] = {}
        self._diagnostics: tuple[SkillDiagnostic, ...] = ()
        self.refresh()

    @property
    def skills(self) -> tuple[Skill, ...]:
        """Every catalogued skill (model-invocable or not), by name."""
        return tuple(self._skills[n] for n in sorted(self._skills))

    @property
    def diagnostics(self) -> tuple[SkillDiagnostic, ...]:
        """What the last scan left out, and why."""
        return self._diagnostics

    def get(self, name: str) -> Skill | None:
        """The catalogued skill ``name``, or ``None``."""
        return self._skills.get(name)

    def refresh(self) -> None:
        """Re-scan the directories, so added, changed and removed skills show."""
        found: dict[str, Skill] = {}
        notes: list[SkillDiagnostic] = []
        for given in self.directories:
            # The configured directory itself may be reached through a link (the user chose
            # it); everything under it must be real.
            root = os.path.realpath(given)
            try:
                entries = sorted(os.scandir(root), key=lambda e: e.name)
            except FileNotFoundError:
                continue
            except OSError as exc:
                notes.append(SkillDiagnostic(path=given, message=exc.strerror or str(exc)))
                continue
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                if entry.is_symlink():
                    notes.append(
                        SkillDiagnostic(path=entry.path, message="symlinked skill folder refused")
                    )
                    continue
                if not entry.is_dir(follow_symlinks=False):
                    continue
                try:
                    skill, _body = self._read(entry.path, entry.name)
                except _TooLarge as exc:
                    notes.append(
                        SkillDiagnostic(
                            path=entry.path,
                            message=f"SKILL.md is {exc.size} bytes; the limit is {self.max_bytes}",
                        )
                    )
                    continue
                except _Refused as exc:
                    notes.append(SkillDiagnostic(path=entry.path, message=str(exc)))
                    continue
                first = found.get(skill.name)
                if first is not None:
                    notes.append(
                        SkillDiagnostic(
                            path=entry.path,
                            message=f'duplicate skill "{skill.name}" ignored; '
                            f"{first.directory} provides it",
                        )
                    )
                    continue
                found[skill.name] = skill
        self._skills = found
        self._diagnostics = tuple(notes)

    def _read(self, folder: str, folder_name: str) -> tuple[Skill, str]:
        text = _read_skill_md(folder, self.max_bytes)
        meta, body = _parse(text, folder_name)
        skill = Skill(
            name=meta["name"],
            description=meta["description"].strip(),
            directory=folder,
            model_invocable=not meta.get("disable-model-invocation", False),
        )
        return skill, body

    def load(self, name: str) -> LoadedSkill:
        """Load skill ``name`` for the model: its current ``SKILL.md`` instructions.

        Raises ``SkillError``: ``invalid skill name``, ``unknown or no longer available``
        (not catalogued, or gone/invalid since the scan), ``not available for model
        invocation``, or too large.
        """
        if not valid_skill_name(name):
            raise SkillError(f'invalid skill name "{_clip(str(name), 200)}"', "SKILL_INVALID_NAME")
        gone = SkillError(f'skill "{name}" is unknown or no longer available', "SKILL_UNKNOWN")
        listed = self._skills.get(name)
        if listed is None:
            raise gone
        if not listed.model_invocable:
            raise SkillError(
                f'skill "{name}" is not available for model invocation', "SKILL_NOT_INVOCABLE"
            )
        try:
            skill, body = self._read(listed.directory, name)
        except _TooLarge as exc:
            raise SkillError(
                f'skill "{name}" is too large to load: SKILL.md is {exc.size} bytes; '
                f"the limit is {self.max_bytes}",
                "SKILL_TOO_LARGE",
            ) from exc
        except _Refused as exc:
            raise gone from exc
        if not skill.model_invocable:
            raise SkillError(
                f'skill "{name}" is not available for model invocation', "SKILL_NOT_INVOCABLE"
            )
        return LoadedSkill(skill=skill, content=body)

    def catalog_text(self) -> str:
        """The model-invocable skills as an ``<available_skills>`` block (``""`` when there
        are none), for a host to put in the system prompt or a context message.

        ::

            <available_skills>
            <skill>
            <name>pdf-tools</name>
            <description>Fill and merge PDF forms.</description>
            </skill>
            </available_skills>
        """
        invocable = [s for s in self.skills if s.model_invocable]
        if not invocable:
            return ""
        parts = ["<available_skills>"]
        for skill in invocable:
            parts += [
                "<skill>",
                f"<name>{escape_text(skill.name)}</name>",
                f"<description>{escape_text(skill.description)}</description>",
                "</skill>",
            ]
        parts.append("</available_skills>")
        return "\n".join(parts)
