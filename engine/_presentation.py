"""Presentation cards: the UI render intents a tool's ``present_call``/``present_result`` return.

A card is a JSON dict tagged by ``"card"``, with camelCase keys; there are pending-call
cards (what a UI shows while a call runs) and completed-call cards:

pending call (``present_call``)
    ``generic {title, kind?, rawInput?, content?, locations?}``,
    ``terminal {title, description?, cwd?}``, ``diff {title, diffs, locations?}``
completed call (``present_result``)
    ``generic {title?, content?}``, ``terminal {title?, output?, exitCode? | signal?}``,
    ``diff {title?, diffs}``, ``search {shape, title?, ..., truncated, total}``,
    ``read {title?, path, offset, lines, totalLines, lang?, content?}``,
    ``web {kind, title?, ...}``

with ``kind`` in ``read|edit|delete|move|search|execute|fetch|other``, ``locations`` a
list of ``{path, line?}``, ``diffs`` a list of ``{path, oldText, newText}`` (``oldText`` is
``null`` for a new file), ``content`` a list of content blocks, ``search`` shaped
``matches`` (``files: [{path, matches: [{lineNumber, line}]}]``) or ``paths``
(``paths: [str]``), ``read`` lines ``{number, text}``, and ``web`` kinds ``search``
(``sources: [{url, title?, snippet?, publishedAt?}], answer?, truncated``) or ``fetch``
(``url, statusCode, truncated``).

Validation is *soft*: presenters are UI sugar, so a presenter that
raises or returns something malformed yields ``None`` (the UI falls back to the generic
card) and never fails the call. Normalisation: keys outside the vocabulary are dropped,
``None`` for an optional field means "absent" (except ``rawInput`` and ``oldText``, where
``null`` is a value), a missing ``oldText`` becomes ``null``, and the result is a fresh plain
dict with ``card`` first and the other keys in vocabulary order.

Where cards go: the pipeline's session events store them. ``call_card_fields`` gives the
``{"callCard": ...}`` a ``tool/call`` (or ``tool/code-dispatch-start``) event gains, and
``result_card_fields`` the ``{"resultCard": ...}`` of a ``tool/result`` (or
``tool/code-dispatch``) event; both are empty when the tool declares no presenter or its
presenter declines or fails, so a log reader falls back to a generic card built from the
event's name, arguments and content (``codemode log`` does that).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any, Final, Literal

from .json import snapshot

__all__ = [
    "CALL_KINDS",
    "CARD_TYPES",
    "CardPhase",
    "call_card_fields",
    "present_call_card",
    "present_result_card",
    "result_card_fields",
    "validate_card",
]

logger = logging.getLogger(__name__)

CardPhase = Literal["call", "result", "any"]

CALL_KINDS: Final = ("read", "edit", "delete", "move", "search", "execute", "fetch", "other")
CARD_TYPES: Final = ("generic", "terminal", "diff", "search", "read", "web")
_CALL_CARDS: Final = frozenset({"generic", "terminal", "diff"})


class _Invalid(Exception):
    """Internal: the card does not match the vocabulary (never escapes this module)."""


_Check = Callable[[Any], Any]


# --- field checks: each returns the normalised value or raises _Invalid -------------


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise _Invalid
    return value


def _nonempty_str(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise _Invalid
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Invalid
    return value


def _int(value: Any, minimum: int | None = None) -> int:
    # ``bool`` is an ``int`` subclass in Python; JSON keeps them apart, so do we.
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Invalid
    if minimum is not None and value < minimum:
        raise _Invalid
    return int(value)


def _positive_int(value: Any) -> int:
    return _int(value, 1)


def _count(value: Any) -> int:
    return _int(value, 0)


def _any_int(value: Any) -> int:
    return _int(value)


def _json(value: Any) -> Any:
    try:
        return snapshot(value, freeze=False, label="rawInput")
    except (TypeError, ValueError, RecursionError) as exc:
        raise _Invalid from exc


def _list_of(item: _Check) -> _Check:
    def check(value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise _Invalid
        return [item(entry) for entry in value]

    return check


def _one_of(*allowed: str) -> _Check:
    def check(value: Any) -> str:
        if not isinstance(value, str) or value not in allowed:
            raise _Invalid
        return value

    return check


def _content_block(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise _Invalid
    if value["type"] == "text" and not isinstance(value.get("text"), str):
        raise _Invalid
    block: dict[str, Any] = _json(value)
    return block


# (key, required, check). ``None`` on an optional key means absent, except for keys in
# _NULLABLE, where null is itself a value.
_Field = tuple[str, bool, _Check]
_NULLABLE: Final = frozenset({"rawInput", "oldText"})


def _record(fields: list[_Field]) -> _Check:
    def check(value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise _Invalid
        out: dict[str, Any] = {}
        for key, required, field_check in fields:
            if key not in value or (value[key] is None and key not in _NULLABLE):
                if required:
                    raise _Invalid
                continue
            out[key] = field_check(value[key])
        return out

    return check


def _str_or_null(value: Any) -> str | None:
    return None if value is None else _str(value)


_diff_record = _record(
    [("path", True, _nonempty_str), ("oldText", False, _str_or_null), ("newText", True, _str)]
)


def _diff(value: Any) -> dict[str, Any]:
    diff = _diff_record(value)
    # A diff always carries oldText (null for a new file); absent means null.
    return {"path": diff["path"], "oldText": diff.get("oldText"), "newText": diff["newText"]}


_location = _record([("path", True, _nonempty_str), ("line", False, _positive_int)])
_locations = _list_of(_location)
_diffs = _list_of(_diff)
_content = _list_of(_content_block)
_kind = _one_of(*CALL_KINDS)

_TITLE_REQUIRED: _Field = ("title", True, _str)
_TITLE_OPTIONAL: _Field = ("title", False, _str)

# Per card, per phase: the fields in output order.
_CALL_FIELDS: Final[dict[str, list[_Field]]] = {
    "generic": [
        _TITLE_REQUIRED,
        ("kind", False, _kind),
        ("rawInput", False, _json),
        ("content", False, _content),
        ("locations", False, _locations),
    ],
    "terminal": [_TITLE_REQUIRED, ("description", False, _str), ("cwd", False, _str)],
    "diff": [_TITLE_REQUIRED, ("diffs", True, _diffs), ("locations", False, _locations)],
}

_RESULT_FIELDS: Final[dict[str, list[_Field]]] = {
    "generic": [_TITLE_OPTIONAL, ("content", False, _content)],
    "terminal": [
        _TITLE_OPTIONAL,
        ("output", False, _str),
        ("exitCode", False, _any_int),
        ("signal", False, _str),
    ],
    "diff": [_TITLE_OPTIONAL, ("diffs", True, _diffs)],
    "read": [
        _TITLE_OPTIONAL,
        ("path", True, _nonempty_str),
        ("offset", True, _positive_int),
        (
            "lines",
            True,
            _list_of(_record([("number", True, _positive_int), ("text", True, _str)])),
        ),
        ("totalLines", True, _count),
        ("lang", False, _str),
        ("content", False, _content),
    ],
}

# ``any``: the union of both phases' fields; ``title`` is optional because completed cards
# may omit it.
_ANY_FIELDS: Final[dict[str, list[_Field]]] = {
    "generic": [
        _TITLE_OPTIONAL,
        ("kind", False, _kind),
        ("rawInput", False, _json),
        ("content", False, _content),
        ("locations", False, _locations),
    ],
    "terminal": [
        _TITLE_OPTIONAL,
        ("description", False, _str),
        ("cwd", False, _str),
        ("output", False, _str),
        ("exitCode", False, _any_int),
        ("signal", False, _str),
    ],
    "diff": [_TITLE_OPTIONAL, ("diffs", True, _diffs), ("locations", False, _locations)],
    "read": _RESULT_FIELDS["read"],
}

_SEARCH_FIELDS: Final[dict[str, list[_Field]]] = {
    "matches": [
        _TITLE_OPTIONAL,
        (
            "files",
            True,
            _list_of(
                _record(
                    [
                        ("path", True, _nonempty_str),
                        (
                            "matches",
                            True,
                            _list_of(
                                _record([("lineNumber", True, _positive_int), ("line", True, _str)])
                            ),
                        ),
                    ]
                )
            ),
        ),
        ("truncated", True, _bool),
        ("total", True, _count),
    ],
    "paths": [
        _TITLE_OPTIONAL,
        ("paths", True, _list_of(_str)),
        ("truncated", True, _bool),
        ("total", True, _count),
    ],
}

_WEB_FIELDS: Final[dict[str, list[_Field]]] = {
    "search": [
        _TITLE_OPTIONAL,
        (
            "sources",
            True,
            _list_of(
                _record(
                    [
                        ("url", True, _nonempty_str),
                        ("title", False, _str),
                        ("snippet", False, _str),
                        ("publishedAt", False, _str),
                    ]
                )
            ),
        ),
        ("answer", False, _str),
        ("truncated", True, _bool),
    ],
    "fetch": [
        _TITLE_OPTIONAL,
        ("url", True, _nonempty_str),
        ("statusCode", True, _any_int),
        ("truncated", True, _bool),
    ],
}


def _compile(table: dict[str, list[_Field]]) -> dict[str, _Check]:
    return {name: _record(fields) for name, fields in table.items()}


_CHECKS: Final[dict[str, dict[str, _Check]]] = {
    "call": _compile(_CALL_FIELDS),
    "result": _compile(_RESULT_FIELDS),
    "any": _compile(_ANY_FIELDS),
    "search": _compile(_SEARCH_FIELDS),
    "web": _compile(_WEB_FIELDS),
}


def _check_card(value: Any, phase: CardPhase) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Invalid
    card = value.get("card")
    if not isinstance(card, str) or card not in CARD_TYPES:
        raise _Invalid
    if phase == "call" and card not in _CALL_CARDS:
        raise _Invalid
    out: dict[str, Any] = {"card": card}
    if card == "search":
        shape = value.get("shape")
        if not isinstance(shape, str) or shape not in _SEARCH_FIELDS:
            raise _Invalid
        out["shape"] = shape
        out.update(_CHECKS["search"][shape](value))
    elif card == "web":
        web_kind = value.get("kind")
        if not isinstance(web_kind, str) or web_kind not in _WEB_FIELDS:
            raise _Invalid
        out["kind"] = web_kind
        out.update(_CHECKS["web"][web_kind](value))
    else:
        out.update(_CHECKS[phase][card](value))
    if card == "terminal" and "exitCode" in out and "signal" in out:
        # A process either exited or was killed, never both: the two are exclusive.
        raise _Invalid
    return out


def validate_card(value: object, *, phase: CardPhase = "any") -> dict[str, Any] | None:
    """Soft-validate a presentation card; return its normalised JSON dict or ``None``.

    ``phase="call"`` accepts only pending-call cards (``generic``, ``terminal``, ``diff``,
    each with a required ``title``); ``phase="result"`` only completed-call cards;
    ``phase="any"`` (the default) accepts either, with the union of their fields. Never
    raises.
    """
    try:
        return _check_card(value, phase)
    except _Invalid:
        return None
    except Exception:  # a hostile value (odd __eq__, huge nesting): still soft
        logger.debug("card validation failed unexpectedly", exc_info=True)
        return None


def _soft_present(
    what: str, presenter: Callable[..., Any], args: tuple[Any, ...], phase: CardPhase
) -> dict[str, Any] | None:
    try:
        produced = presenter(*args)
    except Exception:
        logger.debug("%s raised; falling back to the generic card", what, exc_info=True)
        return None
    if inspect.isawaitable(produced):
        # Presenters are synchronous and pure (they also run during replay). Close an
        # un-awaited coroutine so it does not warn "never awaited".
        close = getattr(produced, "close", None)
        if callable(close):
            close()
        logger.debug("%s returned an awaitable; presenters must be synchronous", what)
        return None
    if produced is None:
        return None
    card = validate_card(produced, phase=phase)
    if card is None:
        logger.debug("%s returned an invalid card: %r", what, produced)
    return card


def present_call_card(
    present_call: Callable[[Any], Any] | None, args: Any
) -> dict[str, Any] | None:
    """Run a tool's ``present_call(args)`` and soft-validate the pending-call card.

    ``None`` means "use the generic card": no presenter, the presenter declined
    (returned ``None``), raised, or returned something outside the call vocabulary.
    """
    if present_call is None:
        return None
    return _soft_present("present_call", present_call, (args,), "call")


def present_result_card(
    present_result: Callable[[Any, Any], Any] | None, args: Any, result_view: Any
) -> dict[str, Any] | None:
    """Run a tool's ``present_result(args, result_view)`` and soft-validate the card.

    ``result_view`` is the durable projection of the result
    (``{"content": [...], "isError": bool, "meta"?: ...}``). ``None`` means "keep the
    pending card and show the raw result content".
    """
    if present_result is None:
        return None
    return _soft_present("present_result", present_result, (args, result_view), "result")


def call_card_fields(tool: Any, args: Any) -> dict[str, Any]:
    """The ``callCard`` field a call's session event stores (``{}`` without a card).

    ``tool`` is the resolved ``ToolDefinition`` (or ``None`` for an unknown tool); the card
    is a sealed snapshot, so it can sit inside a sealed event. Never raises.
    """
    try:
        card = present_call_card(getattr(tool, "present_call", None), args)
        return {} if card is None else {"callCard": snapshot(card)}
    except Exception:  # soft: a card is UI sugar, never a reason to lose the event
        logger.debug("call card failed", exc_info=True)
        return {}


def result_card_fields(tool: Any, args: Any, result: Any, content: Any = None) -> dict[str, Any]:
    """The ``resultCard`` field a settled call's session event stores (``{}`` without one).

    The presenter sees the durable view of the settled ``result``, ``{"content": [...],
    "isError": bool, "meta"?: ...}``; ``content`` replaces the result's own when the event
    records a reshaped copy (a code-dispatch log listener's). The pipeline projects
    ``meta`` (``ToolOutput.presentation_meta``) only for model-direct calls, so for a
    program's sub-call it is projected here from the result's value, which is what a
    ``read`` or ``grep`` card is built from. Never raises.
    """
    try:
        presenter = getattr(tool, "present_result", None)
        if presenter is None:
            return {}
        is_error = bool(getattr(result, "is_error", False))
        meta = getattr(result, "meta", None)
        project = getattr(getattr(tool, "output", None), "presentation_meta", None)
        if meta is None and not is_error and project is not None:
            meta = project(args, getattr(result, "value", None))
        blocks = result.content if content is None else content
        view: dict[str, Any] = {"content": list(blocks), "isError": is_error}
        if meta is not None:
            view["meta"] = meta
        card = present_result_card(presenter, args, view)
        return {} if card is None else {"resultCard": snapshot(card)}
    except Exception:
        logger.debug("result card failed", exc_info=True)
        return {}
