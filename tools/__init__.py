"""codemode first-party tools."""

from __future__ import annotations
