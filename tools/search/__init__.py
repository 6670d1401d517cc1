"""tools/search."""
