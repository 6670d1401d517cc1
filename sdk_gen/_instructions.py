"""The fixed model-facing usage text that precedes each flavour's declarations.

Both texts keep, word for word, the usage instructions models already see from other
code-mode hosts (their wording is part of what programs are written against), with one
deliberate extension: our engine gives ``ToolCallError``
a ``code`` (the failure's ``error.info.code``), so the error bullet gains one sentence
saying so. The stub classes in the fenced blocks declare the same member.
"""

from __future__ import annotations

from typing import Final

__all__ = ["PYTHON_INSTRUCTIONS", "TOOLS_INTRO", "TYPESCRIPT_INSTRUCTIONS"]

TOOLS_INTRO: Final = "The available tools:"
"""The line both texts end with; the sandbox facts block goes right before it."""

# Split into pieces only to keep source lines short; every piece ends where the
# reference's sentence does.
TYPESCRIPT_INSTRUCTIONS: Final = (
    "## Writing code for run_code\n"
    "\n"
    "`run_code` takes two required arguments: `code` — the body of an async TypeScript "
    # Deviation: the usual text says "erasable syntax only — no `enum` or namespaces";
    # our stripper compiles enums, and the facts block says what is refused.
    "function (type annotations are advisory: the code runs type-stripped) — and "
    "`description`, a short summary of what the program does. Inside the program:\n"
    "\n"
    "- Call tools as `await tools.name(args)` — quoted access for exotic names: "
    '`tools["my-tool"](args)`. Every call resolves to the tool\'s typed canonical JSON value. '
    "Tool arguments must be lossless JSON.\n"
    "- A FAILED tool call rejects with `ToolCallError`, whose `toolName` identifies the failed "
    "tool and whose `message` is human-readable — `try/catch` it to handle and continue. "
    # The `code` extension (ours: other hosts' ToolCallError has no code).
    'Its `code` is the failure\'s error code (e.g. `"INVALID_ARGS"`), or `null` when the '
    "failure has none.\n"
    "- Independent read-only calls MAY overlap under `Promise.all` (safe calls run "
    "concurrently; mutating calls run alone, in submission order). Sequence dependent work "
    "with `await`.\n"
    "- Emit results with `return` and/or `console.log(...)`. Only what you print or return is "
    "program output. A successful tool result containing an image is attached after the run "
    "so you can inspect it on the next step; every other intermediate result stays out of the "
    "conversation, so extract just what you need.\n"
    "\n"
    "The available tools:"
)

PYTHON_INSTRUCTIONS: Final = (
    "## Writing code for run_code\n"
    "\n"
    "`run_code` takes two required arguments: `code` — the body of an async Python function "
    "(top-level `await` and `return` both work) — and `description`, a short summary of what "
    "the program does. At run time exactly two of the names declared below are bound: `tools` "
    "and `ToolCallError`. Everything else is a STATIC STUB describing argument and return "
    "types — in particular the `TypedDict` classes do NOT exist at run time, so build "
    'arguments as plain `dict`/`list` JSON values: `await tools.name({"field": 1})`, never '
    "`FooArgs(field=1)`, which raises `NameError`. Inside the program:\n"
    "\n"
    "- Call tools as `await tools.name(args)` — subscript access for exotic, reserved, or "
    'underscore-leading names: `await tools["my-tool"](args)`. Every call resolves to the '
    "tool's typed canonical JSON value (each method's return type below). Tool arguments "
    "must be lossless JSON.\n"
    "- A FAILED tool call raises `ToolCallError`, whose `toolName` identifies the failed tool "
    "and whose message is human-readable — wrap in `try/except` to handle and continue. "
    # The `code` extension (ours: other hosts' ToolCallError has no code).
    'Its `code` is the failure\'s error code (e.g. `"INVALID_ARGS"`), or `None` when the '
    "failure has none.\n"
    "- Independent read-only calls MAY overlap under `asyncio.gather` (safe calls run "
    "concurrently; mutating calls run alone, in submission order). Sequence dependent work "
    "with `await`.\n"
    "- Emit the run's answer with `print(...)` and/or a top-level `return <value>`; the "
    "returned value must be lossless JSON. Only what you print and return is program output. "
    "A successful tool result containing an image is attached after the run so you can "
    "inspect it on the next step; every other intermediate result stays out of the "
    "conversation, so extract just what you need.\n"
    "\n"
    "The available tools:"
)
