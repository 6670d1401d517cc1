"""tools/fs."""
