"""codemode's first-party tools: files, search, shell, background jobs and todos.

These are ordinary ``ToolDefinition``s registered on a ``ToolRuntime``; they run on the host,
in the engine's process, and a sandboxed program reaches them only through the engine's
pipeline (``await tools.read(...)`` is a sub-call like any other). Every file and search path
is confined to one workspace directory, and every command runs contained in its own cgroup.
Layout: ``fs/`` (read, write, edit, str_replace_editor, read_image, path confinement and the
read-before-write policy), ``search/`` (glob and grep on ripgrep), ``shell/`` (bash,
background jobs and their containment); at the top, ``_default`` composes the catalog,
``_catalog``/``_catalog.json`` hold the model-facing names, descriptions and input schemas,
``_config`` the caps, ``_errors`` the coded errors, ``_todo`` the ``todo_write`` tool, and
``_common``/``_text`` small shared helpers. Each tool declares its presentation cards
(``present_call``/``present_result``), which the session log stores.

``default_tools(workspace, ...)`` returns the catalog's tools bound to one workspace
directory; ``FsObservationPolicy`` enforces read-before-write; ``JobManager`` owns
background jobs for the lifetime of an ``async with`` block; ``kill_all_processes()`` kills
every live bash call and job process at once (teardown; also run at interpreter exit).
"""

from __future__ import annotations

from ._default import default_tools as default_tools
from ._errors import BashError as BashError
from ._errors import FsError as FsError
from ._errors import JobError as JobError
from ._errors import SearchError as SearchError
from .fs._images import AttachmentStore as AttachmentStore
from .fs._images import MemoryAttachmentStore as MemoryAttachmentStore
from .fs._policy import FsObservationPolicy as FsObservationPolicy
from .shell._jobs import Job as Job
from .shell._jobs import JobManager as JobManager
from .shell._process import kill_all_processes as kill_all_processes

__all__ = [
    "AttachmentStore",
    "BashError",
    "FsError",
    "FsObservationPolicy",
    "Job",
    "JobError",
    "JobManager",
    "MemoryAttachmentStore",
    "SearchError",
    "default_tools",
    "kill_all_processes",
]
