// Read every source file concurrently and report the biggest one.
// Run with: codemode run examples/fanout.ts --workspace examples/workspace
interface ReadResult {
  path: string;
  totalLines: number;
}

const { paths } = await tools.glob({ pattern: "*" });
const results: ReadResult[] = await Promise.all(
  paths.map((p: string) => tools.read({ file_path: p })),
);
const biggest = results.reduce((a, b) => (b.totalLines > a.totalLines ? b : a));
console.log(`read ${results.length} files`);
return { biggest: biggest.path.split("/").pop(), lines: biggest.totalLines };
