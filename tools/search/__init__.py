"""The search tools: ``glob`` (file names) and ``grep`` (file contents), both on ripgrep.

They run on the host, spawning ``rg`` confined to a directory inside the workspace
(``tools/fs/_paths`` resolves it). ``_rg`` runs ripgrep (bounded output, killed on abort),
``_common`` holds what both tools share (argument checks, the search root, the spill of an
over-long listing, the ``search`` presentation card), and ``_glob`` and ``_grep`` are the
tools. Failures are ``SearchError`` with ``SEARCH_*`` codes (``tools/_errors.py``).
"""
