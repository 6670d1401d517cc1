"""``default_tools``: the first-party catalog bound to one workspace."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Literal

from codemode.engine import ToolDefinition
from codemode.engine.policies import LocalSpillStore

from ._config import ToolsConfig, ensure_private_dir, runtime_dir
from ._errors import FsError
from ._todo import build_todo_write
from .fs._editor import build_str_replace_editor
from .fs._images import MemoryAttachmentStore, build_read_image
from .fs._paths import Workspace
from .fs._read import build_read
from .fs._write_edit import build_edit, build_write
from .interact._ask import build_ask_user_question
from .interact._plan import PlanMode, build_exit_plan_mode
from .lsp._tool import build_lsp_tool
from .search._glob import build_glob
from .search._grep import build_grep
from .shell._bash import build_bash
from .shell._env import normalize_bash_env
from .shell._job_tools import build_job_kill, build_job_list, build_job_output
from .skills._catalog import SkillCatalog
from .skills._tool import build_skill_tool
from .terminal._persistent import build_persistent_bash
from .terminal._tools import build_terminal_tools
from .web._tools import build_web_tools

if TYPE_CHECKING:
    from codemode.engine.policies import SpillStore

    from .fs._images import AttachmentStore
    from .fs._policy import FsObservationPolicy
    from .interact._questions import QuestionProvider
    from .lsp._server import LspManager
    from .shell._jobs import JobManager
    from .terminal._sessions import TerminalManager
    from .web._tools import WebConfig

__all__ = ["default_tools"]


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def default_tools(
    workspace: str | os.PathLike[str],
    *,
    accepts_images: bool = False,
    attachments: AttachmentStore | None = None,
    fs_policy: FsObservationPolicy | None = None,
    jobs: JobManager | None = None,
    spill_store: SpillStore | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    bash_timeout_ms: int = 120_000,
    bash_max_timeout_ms: int = 600_000,
    env_prefix: str = "DSH_",
    env: Mapping[str, str] | None = None,
    bash_env: str | Iterable[str] = "scrubbed",
    allow_parallel_in_progress: bool = True,
    read_limit: int = 2000,
    glob_max_results: int = 100,
    grep_max_matches: int = 250,
    editor_max_output_chars: int = 16000,
    max_result_bytes: int = 16 * 1024 * 1024,
    allow_hardlinks: bool = False,
    questions: QuestionProvider | None = None,
    plan_mode: PlanMode | None = None,
    skills: SkillCatalog | None = None,
    skills_in_description: bool = False,
    web: WebConfig | None = None,
    lsp: LspManager | None = None,
    terminals: TerminalManager | None = None,
    bash: Literal["one-shot", "persistent"] = "one-shot",
    persistent_bash_timeout_ms: int = 300_000,
    terminal_max_result_bytes: int = 262_144,
) -> list[ToolDefinition]:
    """The first-party tools, named as in the catalog, bound to ``workspace``.

    Returns ``read``, ``write``, ``edit``, ``read_image`` (only with ``accepts_images``),
    ``str_replace_editor``, ``glob``, ``grep``, ``bash``, ``job_list``, ``job_output``,
    ``job_kill``, ``todo_write``, ``ask_user_question``, ``exit_plan_mode``, ``skill``,
    ``web_fetch`` and ``web_search``, then ``lsp`` (only with ``lsp``) and the six
    ``terminal_*`` tools (only with ``terminals``).

    - ``fs_policy``: an ``FsObservationPolicy`` the file tools record reads into; install
      the same instance on the runtime to enforce read-before-write.
    - ``jobs``: a running ``JobManager`` (``async with JobManager() as jobs``) for
      ``bash``'s ``run_in_background`` and the ``job_*`` tools; without one, background
      runs fail and the job list is empty. Its output directory must be out of the file
      tools' reach (``ValueError`` otherwise): job output is private to its agent.
    - ``spill_store``: where capped ``glob``/``grep`` results are saved in full (default: a
      ``LocalSpillStore`` under ``output_dir``).
    - ``output_dir``: the runtime-owned directory (outside the workspace) for spills and
      bash output files; default a fresh private directory under the system temp dir,
      created on first use. Reads and searches may reach it (so reported paths can be
      read back); writes may not.
    - ``bash_timeout_ms`` / ``bash_max_timeout_ms``: bash's default deadline and cap.
    - ``env_prefix`` / ``env``: prefix of the managed variables bash sets (default ``DSH_``,
      the name the catalog description uses, so the native schema equals the catalog's)
      (``<prefix>WORKSPACE``, ``<prefix>WORKDIR``, ``<prefix>OUTPUT_DIR``,
      ``<prefix>CALL_ID``, ``<prefix>AGENT``, ``<prefix>JOB_ID``) and extra variables.
    - ``bash_env``: which of the host's environment variables ``bash`` (both variants), its
      background jobs and the terminals see. ``"scrubbed"`` (default): only the allow-list
      ``codemode.tools.shell.PASS_THROUGH`` (``PATH``, ``HOME``, ``USER``, ``LANG``,
      ``LC_*``, ``TERM``, ``TMPDIR``, toolchain homes...), so the host's API keys, tokens
      and passwords stay out of a model's reach; a collection of names: those too;
      ``"inherit"``: the whole environment. ``env`` is added in every case.
    - ``allow_parallel_in_progress``: ``todo_write``'s policy (changes its description).
    - ``attachments``: where ``read_image`` stores images (default in memory).
    - ``read_limit``, ``glob_max_results``, ``grep_max_matches``, ``editor_max_output_chars``:
      the inline caps (their defaults reproduce the catalog descriptions exactly).
    - ``max_result_bytes``: the largest file ``write``, ``edit`` and ``str_replace_editor``
      may produce (or load to edit/view); larger results are refused with ``FS_TOO_LARGE``
      before they are built.
    - ``allow_hardlinks``: let the file tools read and replace regular files with more than
      one hard link (refused by default: such a file may be another name of a file outside
      the workspace).
    - ``questions``: the ``QuestionProvider`` that ``ask_user_question`` and
      ``exit_plan_mode``'s plan review go to (``codemode.tools.interact``); without one
      they fail with ``no user-questions provider is registered`` (and the plan-review
      text of the catalog).
    - ``plan_mode``: which scopes are in plan mode (``PlanMode``; default a fresh one, in
      which no scope is): ``exit_plan_mode`` works only inside it.
    - ``skills``: the ``SkillCatalog`` ``skill`` loads from (default: none, every name is
      unknown). Its directories become readable by the file tools, so the relative paths
      a skill mentions can be read. ``skills_in_description`` appends the catalog's
      ``<available_skills>`` list to ``skill``'s description (otherwise the host gives the
      model ``skills.catalog_text()``, and the description stays the catalog's).
    - ``web``: ``web_fetch``/``web_search``'s ``WebConfig`` (``codemode.tools.web``):
      destinations (default: public addresses only, checked after resolution), caps and
      the search provider (default none: ``web_search`` fails until one is configured;
      ``WebConfig.from_env(os.environ)`` reads them from ``CODEMODE_*`` variables).
    - ``lsp``: a running ``LspManager`` (``async with LspManager() as lsp``) for the ``lsp``
      tool; it starts language servers on first use and stops them when its block ends.
    - ``terminals``: a running ``TerminalManager`` (``async with TerminalManager() as
      terminals``; ``codemode.tools.terminal``) for ``terminal_*`` and the persistent
      ``bash``; leaving its block kills every session's process tree. Pass ``jobs`` too
      for ``terminal_send``'s ``run_in_background``.
    - ``bash``: ``"one-shot"`` (each call a fresh ``bash -c``, the catalog's
      ``dsh-tool-bash``) or ``"persistent"`` (one PTY shell per calling scope, the
      ``dsh-tool-bash-persistent`` variant; needs ``terminals``), whose calls time out after
      ``persistent_bash_timeout_ms`` and reset the shell.
    - ``terminal_max_result_bytes``: the bound of every terminal tool's text (at least 64).
    """
    space = Workspace(workspace)
    out_dir = (
        os.path.abspath(os.fspath(output_dir)) if output_dir is not None else runtime_dir("tools")
    )
    store = (
        spill_store if spill_store is not None else LocalSpillStore(os.path.join(out_dir, "spill"))
    )
    if _positive("bash_timeout_ms", bash_timeout_ms) > _positive(
        "bash_max_timeout_ms", bash_max_timeout_ms
    ):
        raise ValueError("bash_timeout_ms must not exceed bash_max_timeout_ms")
    if not env_prefix:
        raise ValueError("env_prefix must be a non-empty string")
    if bash not in ("one-shot", "persistent"):
        raise ValueError(f'bash must be "one-shot" or "persistent", got {bash!r}')
    if bash == "persistent" and terminals is None:
        raise ValueError('bash="persistent" needs terminals=TerminalManager() (it owns the shells)')
    cfg = ToolsConfig(
        workspace=space,
        spill_store=store,
        output_dir=out_dir,
        fs_policy=fs_policy,
        jobs=jobs,
        attachments=(attachments or MemoryAttachmentStore()) if accepts_images else None,
        bash_default_timeout_ms=bash_timeout_ms,
        bash_max_timeout_ms=bash_max_timeout_ms,
        env_prefix=env_prefix,
        extra_env=dict(env or {}),
        bash_env=normalize_bash_env(bash_env),
        allow_parallel_in_progress=allow_parallel_in_progress,
        read_limit=_positive("read_limit", read_limit),
        glob_max_results=_positive("glob_max_results", glob_max_results),
        grep_max_matches=_positive("grep_max_matches", grep_max_matches),
        editor_max_output_chars=_positive("editor_max_output_chars", editor_max_output_chars),
        max_result_bytes=_positive("max_result_bytes", max_result_bytes),
        allow_hardlinks=bool(allow_hardlinks),
    )
    # Results report paths in these runtime-owned directories; let reads follow them.
    space.allow_reads_under(out_dir)
    spill_dir = getattr(store, "directory", None)
    if spill_dir is not None:
        space.allow_reads_under(os.fspath(spill_dir))
    # Skills mention files relative to their folder; reads (never writes) may follow.
    catalog = skills if skills is not None else SkillCatalog(())
    for directory in catalog.directories:
        if os.path.isdir(directory):
            space.allow_reads_under(directory)
    if jobs is not None:
        # Job output is private to its agent: no file tool may reach it, by any path. Probe
        # with the (existing) directory itself, as a read tool would resolve it.
        try:
            space.resolve(ensure_private_dir(jobs.output_dir))
        except (FsError, ValueError):
            pass
        else:
            raise ValueError(
                f"the JobManager's output_dir {jobs.output_dir} is within the file tools' reach "
                "(the workspace or a readable runtime directory); job output must stay private"
            )
    if fs_policy is not None:
        fs_policy.bind(space)
    tools = [build_read(cfg), build_write(cfg), build_edit(cfg)]
    if accepts_images:
        tools.append(build_read_image(cfg))
    tools += [
        build_str_replace_editor(cfg),
        build_glob(cfg),
        build_grep(cfg),
        build_bash(cfg)
        if bash == "one-shot" or terminals is None
        else build_persistent_bash(cfg, terminals, timeout_ms=persistent_bash_timeout_ms),
        build_job_list(cfg),
        build_job_output(cfg),
        build_job_kill(cfg),
        build_todo_write(cfg),
        build_ask_user_question(cfg, questions),
        build_exit_plan_mode(cfg, plan_mode if plan_mode is not None else PlanMode(), questions),
        build_skill_tool(cfg, catalog, describe_catalog=skills_in_description),
        *build_web_tools(cfg, web),
    ]
    if lsp is not None:
        tools.append(build_lsp_tool(cfg, lsp))
    if terminals is not None:
        tools += build_terminal_tools(cfg, terminals, max_result_bytes=terminal_max_result_bytes)
    return tools
