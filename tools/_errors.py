"""Coded errors of the first-party tools.

::

    engine.HarnessError
    ├── FsError        FS_* codes (read, write, edit, str_replace_editor, read_image, paths)
    ├── SearchError    SEARCH_* codes (glob, grep)
    ├── BashError      BASH_* codes (bash)
    ├── JobError       JOB_* codes (job_list, job_output, job_kill, background bash)
    ├── QuestionError  QUESTION_* codes (ask_user_question, question providers)
    ├── PlanModeError  PLAN_* codes (exit_plan_mode)
    ├── SkillError     SKILL_* codes (skill, the skill catalogue)
    ├── LspError       LSP_* codes (lsp)
    ├── WebError       WEB_* codes (web_fetch, web_search; listed in tools/web/__init__.py)
    └── TerminalError  TERMINAL_* codes (terminal_*, persistent bash)

Every failure a first-party tool raises carries one of these, so hosts can branch on a
stable ``error.info.code`` instead of parsing messages. Argument problems the input schema
cannot express (blank strings, non-integers) keep fixed message texts (``file_path must be a non-empty
string``) and carry
``FS_INVALID_ARGS`` / ``SEARCH_INVALID_ARGS``.

FS codes: ``FS_INVALID_ARGS``, ``FS_INVALID_PATH`` (NUL byte), ``FS_OUTSIDE_WORKSPACE``,
``FS_NOT_FOUND``, ``FS_NOT_REGULAR_FILE`` (directory, FIFO, socket, device),
``FS_HARDLINKED`` (a regular file with more than one link), ``FS_NOT_TEXT``,
``FS_TOO_LARGE`` (an input or a result over a configured cap), ``FS_NOT_OBSERVED`` and
``FS_STALE_VERSION`` (read-before-write), ``FS_EDIT_NOT_FOUND``, ``FS_AMBIGUOUS_EDIT``,
``FS_ALREADY_EXISTS``, ``FS_NOT_IMAGE``, ``FS_RACE`` (the path kept changing under the call),
``FS_IO_ERROR`` (any other operating-system error, its text in the message), ``FS_ABORTED``.
BASH and JOB codes are listed in ``tools/shell/_bash.py`` and ``tools/shell/_jobs.py``,
LSP codes in ``tools/lsp/_tool.py``.
"""

from __future__ import annotations

from codemode.engine import HarnessError

__all__ = [
    "BashError",
    "FsError",
    "JobError",
    "LspError",
    "PlanModeError",
    "QuestionError",
    "SearchError",
    "SkillError",
    "TerminalError",
    "WebError",
    "io_error",
]


class FsError(HarnessError):
    """A filesystem failure; ``code`` is one of the ``FS_*`` codes above."""

    #: Every instance carries one of the ``FS_*`` codes; ``code`` is the default for one
    #: raised without a code.
    family = "FS_"
    code = "FS_IO_ERROR"


class SearchError(HarnessError):
    """A glob/grep failure; ``code`` is one of the ``SEARCH_*`` codes."""

    #: Every instance carries one of the ``SEARCH_*`` codes; ``code`` is the default for one
    #: raised without a code.
    family = "SEARCH_"
    code = "SEARCH_FAILED"


class BashError(HarnessError):
    """A ``bash`` failure; ``code`` is one of the ``BASH_*`` codes."""

    #: Every instance carries one of the ``BASH_*`` codes; ``code`` is the default for one
    #: raised without a code.
    family = "BASH_"
    code = "BASH_ERROR"


class JobError(HarnessError):
    """A background-job failure; ``code`` is one of the ``JOB_*`` codes."""

    #: Every instance carries one of the ``JOB_*`` codes; ``code`` is the default for one
    #: raised without a code.
    family = "JOB_"
    code = "JOB_ERROR"


def io_error(exc: OSError, verb: str, path: str) -> FsError:
    """An operating-system error a file tool did not anticipate (``EACCES``, ``EMFILE``,
    ``ENAMETOOLONG``, ...), as a coded ``FsError`` naming the path as written."""
    return FsError(f'cannot {verb} "{path}": {exc.strerror or exc}', "FS_IO_ERROR")


class QuestionError(HarnessError):
    """An ``ask_user_question`` failure; ``code`` is one of the ``QUESTION_*`` codes
    listed in ``tools/interact/_questions.py``."""

    family = "QUESTION_"
    code = "QUESTION_ERROR"


class PlanModeError(HarnessError):
    """An ``exit_plan_mode`` outcome other than approval; ``code`` is one of the ``PLAN_*``
    codes listed in ``tools/interact/_plan.py``."""

    family = "PLAN_"
    code = "PLAN_ERROR"


class SkillError(HarnessError):
    """A ``skill`` failure; ``code`` is one of the ``SKILL_*`` codes listed in
    ``tools/skills/_catalog.py``."""

    family = "SKILL_"
    code = "SKILL_ERROR"


class WebError(HarnessError):
    """A ``web_fetch``/``web_search`` failure; ``code`` is one of the ``WEB_*`` codes."""

    #: Every instance carries one of the ``WEB_*`` codes; ``code`` is the default for one
    #: raised without a code.
    family = "WEB_"
    code = "WEB_ERROR"


class LspError(HarnessError):
    """An ``lsp`` failure; ``code`` is one of the ``LSP_*`` codes listed in
    ``tools/lsp/_tool.py``."""

    family = "LSP_"
    code = "LSP_SERVER_ERROR"


class TerminalError(HarnessError):
    """A terminal or persistent-bash failure; ``code`` is one of the ``TERMINAL_*`` codes
    (listed in ``tools/terminal/__init__.py``)."""

    #: Every instance carries one of the ``TERMINAL_*`` codes; ``code`` is the default for
    #: one raised without a code.
    family = "TERMINAL_"
    code = "TERMINAL_ERROR"
