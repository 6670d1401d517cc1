"""The file tools: ``read``, ``write``, ``edit``, ``str_replace_editor`` and ``read_image``.

They run on the host, in the engine's process, confined to one workspace directory:
``_paths`` resolves every path with ``openat``-style descriptor walks (no ``..`` trick, symlink
or concurrent rename escapes the workspace, and job output directories are unreachable), and
``_io`` does the reads and the atomic writes on those descriptors. ``_policy`` is the
read-before-write rule (``FsObservationPolicy``: a file must be read, unchanged since, before
``write``/``edit`` replace it). ``_read``, ``_write_edit``, ``_editor`` and ``_images`` are the
tools themselves; ``_diff`` builds the ``diff`` presentation cards. Failures are ``FsError``
with ``FS_*`` codes (``tools/_errors.py``).
"""
