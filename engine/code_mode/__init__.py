"""engine/code_mode."""
