"""``codemode log SESSION.db``: a session's tool calls, printed as presentation cards.

A session file is what a ``SqliteSessionLog`` writes. Each call is paired from its two
events (``tool/call`` + ``tool/result`` for a model-direct call, ``tool/code-dispatch-start``
+ ``tool/code-dispatch`` for a call a program made) and shown as one panel: the call card
(the event's ``callCard``) on top, the result card (``resultCard``) below. A tool without
presenters, or whose presenter declined, gets the generic card: its name, its arguments
and its result content. ``--json`` prints the same pairing as one JSON object.

Exit codes: ``0`` printed, ``2`` the file is missing or is not a session log.
"""

from __future__ import annotations

import difflib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from codemode.engine import SqliteSessionLog
from codemode.engine.json import thaw

from ._console import LazyConsole, escape

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.panel import Panel

__all__ = ["collect_calls", "log_command", "panels"]

# rich loads in the functions that draw: ``codemode agent`` imports this module for
# ``collect_calls`` and ``panels``, and draws only when a tool is called.
_err = LazyConsole(stderr=True)
# Cap per text body so one huge output does not bury the rest of the session.
_MAX_LINES = 40


def collect_calls(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pair a session's call and settle events into one record per call, in call order.

    Each record: ``id``, ``parentId`` (the ``run_code`` call a sub-call came from, else
    ``None``), ``name``, ``arguments``, ``callCard``, ``resultCard``, ``settled``,
    ``isError`` and ``content`` (the durable result content).
    """
    calls: dict[str, dict[str, Any]] = {}
    names: dict[str, str] = {}

    def record(call_id: str, name: str, arguments: Any, parent: str | None) -> dict[str, Any]:
        entry = calls.get(call_id)
        if entry is None:
            entry = calls[call_id] = {
                "id": call_id,
                "parentId": parent,
                "name": name,
                "arguments": arguments,
                "callCard": None,
                "resultCard": None,
                "settled": False,
                "isError": False,
                "content": [],
            }
        return entry

    for event in events:
        kind = event.get("type")
        if kind == "tool/call":
            call_id = str(event.get("callId"))
            arguments = event.get("arguments")
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments) if arguments else {}
                except ValueError:
                    pass
            names[call_id] = str(event.get("name"))
            entry = record(call_id, names[call_id], arguments, None)
            entry["callCard"] = event.get("callCard")
        elif kind == "tool/result":
            call_id = str(event.get("callId"))
            entry = record(call_id, names.get(call_id, "?"), None, None)
            entry["settled"] = True
            entry["resultCard"] = event.get("resultCard")
            for block in (event.get("message") or {}).get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool-result":
                    entry["isError"] = bool(block.get("isError"))
                    entry["content"] = list(block.get("content") or [])
        elif kind in ("tool/code-dispatch-start", "tool/code-dispatch"):
            entry = record(
                str(event.get("subCallId")),
                str(event.get("name")),
                event.get("arguments"),
                event.get("parentCallId"),
            )
            if kind == "tool/code-dispatch-start":
                entry["callCard"] = event.get("callCard")
            else:
                if entry["callCard"] is None:
                    entry["callCard"] = event.get("callCard")
                entry["settled"] = True
                entry["resultCard"] = event.get("resultCard")
                entry["isError"] = bool(event.get("isError"))
                entry["content"] = list(event.get("content") or [])
    return list(calls.values())


# --- rendering -----------------------------------------------------------------------


def _clip(body: str) -> str:
    lines = body.splitlines()
    if len(lines) <= _MAX_LINES:
        return body.rstrip("\n")
    return "\n".join([*lines[:_MAX_LINES], f"... ({len(lines) - _MAX_LINES} more lines)"])


def _content(blocks: Any) -> list[RenderableType]:
    from rich.text import Text

    out: list[RenderableType] = []
    for block in blocks or []:
        if isinstance(block, dict) and block.get("type") == "text":
            out.append(Text(_clip(str(block.get("text", "")))))
        elif isinstance(block, dict):
            out.append(Text(f"[{block.get('type')} content]", style="dim"))
    return out


def _diffs(diffs: Any) -> list[RenderableType]:
    out: list[RenderableType] = []
    for diff in diffs or []:
        old = diff.get("oldText")
        lines = difflib.unified_diff(
            [] if old is None else str(old).splitlines(),
            str(diff.get("newText", "")).splitlines(),
            fromfile="/dev/null" if old is None else str(diff.get("path")),
            tofile=str(diff.get("path")),
            lineterm="",
        )
        from rich.syntax import Syntax  # pygments: only for a diff, not at start-up

        out.append(Syntax(_clip("\n".join(lines)) or "(no change)", "diff", theme="ansi_dark"))
    return out


def _call_body(entry: dict[str, Any]) -> tuple[str, list[RenderableType]]:
    from rich.text import Text

    card = entry["callCard"]
    if not isinstance(card, dict):
        args = json.dumps(thaw(entry["arguments"]), ensure_ascii=False, indent=2)
        return entry["name"], [Text(_clip(args), style="dim")]
    title = str(card.get("title", entry["name"]))
    parts: list[RenderableType] = []
    kind = card.get("card")
    if kind == "terminal":
        title = f"$ {title}"
        if card.get("description"):
            parts.append(Text(str(card["description"]), style="italic"))
        if card.get("cwd"):
            parts.append(Text(f"cwd: {card['cwd']}", style="dim"))
    elif kind == "diff":
        parts += _diffs(card.get("diffs"))
    else:
        if card.get("kind"):
            parts.append(Text(f"kind: {card['kind']}", style="dim"))
        parts += _content(card.get("content"))
    for location in card.get("locations") or []:
        line = f":{location['line']}" if location.get("line") else ""
        parts.append(Text(f"at {location.get('path')}{line}", style="dim"))
    return title, parts


def _result_body(entry: dict[str, Any]) -> list[RenderableType]:
    from rich.text import Text

    if not entry["settled"]:
        return [Text("(never settled)", style="yellow")]
    card = entry["resultCard"]
    if not isinstance(card, dict):
        return _content(entry["content"]) or [Text("(no content)", style="dim")]
    parts: list[RenderableType] = []
    if card.get("title"):
        parts.append(Text(str(card["title"]), style="bold"))
    kind = card.get("card")
    if kind == "terminal":
        if card.get("output"):
            parts.append(Text(_clip(str(card["output"]))))
        if "exitCode" in card:
            parts.append(Text(f"exit code {card['exitCode']}", style="dim"))
        if "signal" in card:
            parts.append(Text(f"killed by {card['signal']}", style="red"))
    elif kind == "diff":
        parts += _diffs(card.get("diffs"))
    elif kind == "read":
        numbered = "\n".join(f"{line['number']:>6}  {line['text']}" for line in card["lines"])
        parts.append(Text(f"{card['path']} ({card['totalLines']} lines)", style="dim"))
        parts.append(Text(_clip(numbered)))
    elif kind == "search":
        if card.get("shape") == "paths":
            parts.append(Text(_clip("\n".join(card.get("paths") or []))))
        else:
            rows = [
                f"{file['path']}:{match['lineNumber']}: {match['line']}"
                for file in card.get("files") or []
                for match in file.get("matches") or []
            ]
            parts.append(Text(_clip("\n".join(rows))))
        more = " (truncated)" if card.get("truncated") else ""
        parts.append(Text(f"{card.get('total')} total{more}", style="dim"))
    elif kind == "web":
        for source in card.get("sources") or []:
            parts.append(Text(f"{source.get('title') or ''} {source.get('url')}".strip()))
        if card.get("url"):
            parts.append(Text(f"{card['url']} -> {card.get('statusCode')}"))
    else:
        parts += _content(card.get("content"))
    return parts


def panels(calls: list[dict[str, Any]]) -> list[Panel]:
    """One panel per top-level call of ``collect_calls``'s records, each ``run_code``
    panel holding the panels of the sub-calls its program made, in call order, between
    its call and its result (so a sub-call never shows after the run that made it)."""
    ids = {c["id"] for c in calls}
    children: dict[str, list[dict[str, Any]]] = {}
    top: list[dict[str, Any]] = []
    for call in calls:
        parent = call["parentId"]
        if parent is not None and parent in ids and parent != call["id"]:
            children.setdefault(str(parent), []).append(call)
        else:
            top.append(call)
    return [_panel(call, children, set()) for call in top]


def _panel(
    entry: dict[str, Any],
    children: dict[str, list[dict[str, Any]]] | None = None,
    seen: set[str] | None = None,
) -> Panel:
    from rich.console import Group
    from rich.panel import Panel
    from rich.text import Text

    title, parts = _call_body(entry)
    seen = set() if seen is None else seen
    seen.add(entry["id"])
    for child in (children or {}).get(entry["id"], []):
        if child["id"] not in seen:
            parts.append(_panel(child, children, seen))
    parts.append(Text("─" * 8, style="dim"))
    parts += _result_body(entry)
    status = "[red]error[/]" if entry["isError"] else "[green]ok[/]"
    nested = f" [dim]in {escape(str(entry['parentId']))}[/]" if entry["parentId"] else ""
    return Panel(
        Group(*parts),
        title=f"[bold]{escape(title)}[/]",
        title_align="left",
        subtitle=f"{escape(entry['name'])} · {status}{nested}",
        subtitle_align="left",
        border_style="red" if entry["isError"] else "blue",
    )


def log_command(
    session: Annotated[Path, typer.Argument(help="A session file (SQLite) a run wrote.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the calls as one JSON object instead.")
    ] = False,
) -> None:
    """Print a session's tool calls as presentation cards."""
    try:
        events = SqliteSessionLog.read(session)
    except (FileNotFoundError, ValueError) as exc:
        _err.line(("bold red", "error:"), f" {exc}", soft_wrap=True, highlight=False)
        raise typer.Exit(2) from None
    calls = collect_calls([thaw(event) for event in events])
    if as_json:
        sys.stdout.write(json.dumps({"calls": calls}, ensure_ascii=False) + "\n")
        return
    from rich.console import Console

    out = Console(highlight=False)
    if not calls:
        out.print("(no tool calls in this session)")
    for panel in panels(calls):
        out.print(panel)
