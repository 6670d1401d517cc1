# Tool failures arrive as ToolCallError with toolName, message and code.
try:
    await tools.read({"file_path": "does/not/exist.txt"})
except ToolCallError as err:
    print(f"{err.toolName} failed ({err.code}): {err}")

todos = await tools.grep({"pattern": "TODO", "include": "*.py"})
return len(todos["matches"])
