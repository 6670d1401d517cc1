# Survey the workspace: files per extension, line counts, and every TODO marker.
# Independent reads overlap under asyncio.gather; results arrive in call order.
import asyncio

found = await tools.glob({"pattern": "*"})
paths = sorted(found["paths"])
by_ext = {}
for path in paths:
    ext = path.rsplit(".", 1)[-1] if "." in path else "(none)"
    by_ext[ext] = by_ext.get(ext, 0) + 1

reads = await asyncio.gather(*[tools.read({"file_path": p}) for p in paths])
lines = {p: r["totalLines"] for p, r in zip(paths, reads)}

todos = await tools.grep({"pattern": "TODO"})

print(f"{len(paths)} files in the workspace")
for ext, count in sorted(by_ext.items()):
    print(f"  .{ext}: {count}")
print(f"longest file: {max(lines, key=lines.get)} ({max(lines.values())} lines)")
return {
    "todos": sorted(f"{m['path']}:{m['lineNumber']}" for m in todos["matches"]),
    "totalLines": sum(lines.values()),
}
