"""Coded errors of the first-party tools.

::

    engine.HarnessError
    ├── FsError        FS_* codes (read, write, edit, str_replace_editor, read_image, paths)
    ├── SearchError    SEARCH_* codes (glob, grep)
    ├── BashError      BASH_* codes (bash)
    └── JobError       JOB_* codes (job_list, job_output, job_kill, background bash)

Argument problems the input schema cannot express (blank strings, non-integers) are raised as
plain ``ValueError``s so that, as in the reference, their failures carry no ``error.info`` --
except in ``bash`` and the job tools, where every failure carries a stable code (a host or
program must be able to tell "no such job" from "bad argument" without parsing text).
"""

from __future__ import annotations

from engine import HarnessError

__all__ = ["BashError", "FsError", "JobError", "SearchError"]


class FsError(HarnessError):
    """A filesystem failure; ``code`` is one of the reference's ``FS_*`` codes."""


class SearchError(HarnessError):
    """A glob/grep failure; ``code`` is one of the reference's ``SEARCH_*`` codes."""


class BashError(HarnessError):
    """A ``bash`` failure; ``code`` is one of the ``BASH_*`` codes."""


class JobError(HarnessError):
    """A background-job failure; ``code`` is one of the ``JOB_*`` codes."""
