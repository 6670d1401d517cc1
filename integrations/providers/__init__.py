"""Provider adapters: the runtime's tool schemas in OpenAI and Anthropic formats, and the
providers' tool-call messages back to ``ToolExecutionInput``.
"""
