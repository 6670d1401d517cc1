"""Counted nouns in the agent's messages: ``1 round``, ``2 rounds`` (never ``round(s)``)."""

from __future__ import annotations

__all__ = ["count_of"]


def count_of(n: int, noun: str, plural: str | None = None) -> str:
    """``1 round``, ``2 rounds``, ``0 rounds`` (``plural`` for irregular nouns)."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"
