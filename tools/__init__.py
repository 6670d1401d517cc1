"""codemode's first-party tools: files, search, shell, background jobs and todos.

``default_tools(workspace, ...)`` returns the catalog's tools bound to one workspace
directory; ``FsObservationPolicy`` enforces read-before-write; ``JobManager`` owns
background jobs for the lifetime of an ``async with`` block.
"""

from __future__ import annotations

from ._default import default_tools as default_tools
from ._errors import FsError as FsError
from ._errors import SearchError as SearchError
from ._fs_policy import FsObservationPolicy as FsObservationPolicy
from ._images import AttachmentStore as AttachmentStore
from ._images import MemoryAttachmentStore as MemoryAttachmentStore
from ._jobs import Job as Job
from ._jobs import JobManager as JobManager

__all__ = [
    "AttachmentStore",
    "FsError",
    "FsObservationPolicy",
    "Job",
    "JobManager",
    "MemoryAttachmentStore",
    "SearchError",
    "default_tools",
]
