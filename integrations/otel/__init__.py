"""OpenTelemetry: one span per tool execution (needs the ``otel`` extra's API package)."""
