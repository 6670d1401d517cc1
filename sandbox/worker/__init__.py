"""sandbox/worker."""
