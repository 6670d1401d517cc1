"""Terminals: persistent PTY sessions (``terminal_*``) and the persistent ``bash`` variant."""
