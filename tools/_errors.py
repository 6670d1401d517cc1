"""Coded errors of the first-party tools.

::

    engine.HarnessError
    ├── FsError        FS_* codes (read, write, edit, str_replace_editor, read_image, paths)
    └── SearchError    SEARCH_* codes (glob, grep)

Argument problems the input schema cannot express (blank strings, non-integers) are raised as
plain ``ValueError``s so that, as in the reference, their failures carry no ``error.info``.
"""

from __future__ import annotations

from engine import HarnessError

__all__ = ["FsError", "SearchError"]


class FsError(HarnessError):
    """A filesystem failure; ``code`` is one of the reference's ``FS_*`` codes."""


class SearchError(HarnessError):
    """A glob/grep failure; ``code`` is one of the reference's ``SEARCH_*`` codes."""
