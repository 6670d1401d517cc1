"""codemode's first-party tools: files, search, shell, jobs, todos, terminals, web,
questions and plan review, skills and language servers.

These are ordinary ``ToolDefinition``s registered on a ``ToolRuntime``; they run on the host,
in the engine's process, and a sandboxed program reaches them only through the engine's
pipeline (``await tools.read(...)`` is a sub-call like any other). Every file and search path
is confined to one workspace directory, and every command runs contained in its own cgroup.
Layout: ``fs/`` (read, write, edit, str_replace_editor, read_image, path confinement and the
read-before-write policy), ``search/`` (glob and grep on ripgrep), ``shell/`` (bash,
background jobs and their containment), ``terminal/`` (PTY sessions: ``terminal_*`` and the
persistent ``bash``), ``web/`` (web_fetch, web_search, the destination policy and search
providers), ``interact/`` (ask_user_question, exit_plan_mode, question providers, plan
mode), ``skills/`` (the skill catalogue and tool), ``lsp/`` (the language-server client and
tool); at the top, ``_default`` composes the catalog,
``_catalog``/``_catalog.json`` hold the model-facing names, descriptions and input schemas,
``_config`` the caps, ``_errors`` the coded errors, ``_todo`` the ``todo_write`` tool, and
``_common``/``_text`` small shared helpers. Each tool declares its presentation cards
(``present_call``/``present_result``), which the session log stores.

``default_tools(workspace, ...)`` returns the catalog's tools bound to one workspace
directory; ``FsObservationPolicy`` enforces read-before-write; ``JobManager``,
``TerminalManager`` and ``LspManager`` own background jobs, terminal sessions and language
servers for the lifetime of an ``async with`` block; ``kill_all_processes()`` kills every
live bash call, job and terminal process at once (teardown; also run at interpreter exit).
The services' own names live in their subpackages (``codemode.tools.web.WebConfig``, ...).
"""

from __future__ import annotations

from ._catalog import catalog_entry as catalog_entry
from ._catalog import define_catalog_tool as define_catalog_tool
from ._catalog import parameter_spec as parameter_spec
from ._default import default_tools as default_tools
from ._errors import BashError as BashError
from ._errors import FsError as FsError
from ._errors import JobError as JobError
from ._errors import LspError as LspError
from ._errors import PlanModeError as PlanModeError
from ._errors import QuestionError as QuestionError
from ._errors import SearchError as SearchError
from ._errors import SkillError as SkillError
from ._errors import TerminalError as TerminalError
from ._errors import WebError as WebError
from .fs._images import AttachmentStore as AttachmentStore
from .fs._images import MemoryAttachmentStore as MemoryAttachmentStore
from .fs._policy import FsObservationPolicy as FsObservationPolicy
from .interact._plan import PlanMode as PlanMode
from .interact._questions import QuestionProvider as QuestionProvider
from .interact._questions import ScriptedQuestionProvider as ScriptedQuestionProvider
from .lsp._server import LspManager as LspManager
from .shell._jobs import Job as Job
from .shell._jobs import JobManager as JobManager
from .shell._process import kill_all_processes as kill_all_processes
from .skills._catalog import SkillCatalog as SkillCatalog
from .terminal._sessions import TerminalManager as TerminalManager
from .web._tools import WebConfig as WebConfig

__all__ = [
    "AttachmentStore",
    "BashError",
    "FsError",
    "FsObservationPolicy",
    "Job",
    "JobError",
    "JobManager",
    "LspError",
    "LspManager",
    "MemoryAttachmentStore",
    "PlanMode",
    "PlanModeError",
    "QuestionError",
    "QuestionProvider",
    "ScriptedQuestionProvider",
    "SearchError",
    "SkillCatalog",
    "SkillError",
    "TerminalError",
    "TerminalManager",
    "WebConfig",
    "WebError",
    "catalog_entry",
    "default_tools",
    "define_catalog_tool",
    "kill_all_processes",
    "parameter_spec",
]
