"""Web: ``web_fetch`` and ``web_search`` (providers, destination policy, HTML to Markdown)."""
