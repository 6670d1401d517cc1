"""sandbox/typescript."""
