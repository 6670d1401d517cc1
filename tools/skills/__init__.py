"""``skill``: a catalogue of ``SKILL.md`` folders from configured directories."""
