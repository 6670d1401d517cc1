"""codemode's first-party tools: files, search, shell, background jobs and todos.

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
