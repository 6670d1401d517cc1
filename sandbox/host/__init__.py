"""sandbox/host."""
