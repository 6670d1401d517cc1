"""sandbox/python."""
