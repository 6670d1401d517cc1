"""tools/shell."""
