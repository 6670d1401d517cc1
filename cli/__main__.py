"""``python -m codemode.cli`` runs the ``codemode`` command."""

from __future__ import annotations

from . import main

main()
