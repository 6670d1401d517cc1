"""The resolved configuration every tool builder receives (see ``default_tools``)."""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from .fs._paths import Workspace

if TYPE_CHECKING:
    from codemode.engine.policies import SpillStore

    from .fs._images import AttachmentStore
    from .fs._policy import FsObservationPolicy
    from .shell._jobs import JobManager

__all__ = ["ToolsConfig", "runtime_dir"]


def runtime_dir(label: str) -> str:
    """A fresh, not yet created path for a runtime-owned directory outside any workspace."""
    return os.path.join(tempfile.gettempdir(), f"codemode-{label}-{secrets.token_hex(6)}")


def ensure_private_dir(path: str) -> str:
    """Create ``path`` (mode 0o700) if needed and return it."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


@dataclass(kw_only=True)
class ToolsConfig:
    """Caps, services and directories shared by the tool builders."""

    workspace: Workspace
    spill_store: SpillStore
    output_dir: str
    fs_policy: FsObservationPolicy | None = None
    jobs: JobManager | None = None
    attachments: AttachmentStore | None = None
    # file tools: the largest file a write/edit/str_replace_editor may produce or load, and
    # whether regular files with more than one hard link may be read or replaced
    max_result_bytes: int = 16 * 1024 * 1024
    allow_hardlinks: bool = False
    # read
    read_limit: int = 2000
    read_max_line_length: int = 2000
    read_max_bytes: int = 51200
    # glob/grep
    glob_max_results: int = 100
    grep_max_matches: int = 250
    grep_max_line_bytes: int = 2000
    search_meta_max_bytes: int = 65536
    raw_output_max_bytes: int = 20_000_000
    stderr_max_bytes: int = 65536
    search_timeout_ms: int = 30000
    # str_replace_editor
    editor_max_output_chars: int = 16000
    # bash
    bash_default_timeout_ms: int = 120_000
    bash_max_timeout_ms: int = 600_000
    bash_tail_bytes: int = 64_000
    bash_spill_max_bytes: int = 64 * 1024 * 1024
    env_prefix: str = "DSH_"
    extra_env: Mapping[str, str] = field(default_factory=dict)
    # which host variables bash, jobs, persistent shells and terminals see (shell/_env.py)
    bash_env: Literal["scrubbed", "inherit"] | frozenset[str] = "scrubbed"
    # todo_write
    allow_parallel_in_progress: bool = True
    # read_image
    image_max_bytes: int = 5 * 1024 * 1024
    image_max_side_px: int = 8000
    accepted_image_types: tuple[str, ...] = ("image/png", "image/jpeg", "image/webp", "image/gif")
