// Async code against tools: Promise.all, retries, try/catch, async generators.
interface FileInfo {
  path: string;
  size: number;
}
type ReadResult = { path: string; text: string; lines: number };

async function readAll(paths: string[], limit?: number): Promise<ReadResult[]> {
  const results = await Promise.all(
    paths.map(async (path: string): Promise<ReadResult> => {
      const res = (await tools.read_file({ path, limit: limit ?? 100 })) as { text: string };
      return { path, text: res.text, lines: res.text.split("\n").length };
    }),
  );
  return results.sort((a, b) => a.path.localeCompare(b.path));
}

async function withRetry<T>(fn: () => Promise<T>, attempts: number = 3): Promise<T> {
  let lastError: unknown;
  for (let i = 0; i < attempts; i++) {
    try {
      return await fn();
    } catch (err: unknown) {
      lastError = err;
      console.log(`attempt ${i + 1} failed: ${(err as Error).message}`);
    }
  }
  throw lastError as Error;
}

async function* sizes(files: FileInfo[]): AsyncGenerator<number, void, undefined> {
  for (const f of files) {
    await null;
    yield f.size;
  }
}

const files: FileInfo[] = [
  { path: "b.txt", size: 20 },
  { path: "a.txt", size: 10 },
];
const read = await readAll(files.map((f) => f.path));
for (const r of read) console.log(r.path, r.lines, JSON.stringify(r.text));

let calls = 0;
const flaky = async (): Promise<string> => {
  calls += 1;
  if (calls < 3) throw new Error(`flaky call ${calls}`);
  return "ok after " + calls;
};
console.log(await withRetry<string>(flaky));

let sum = 0;
for await (const size of sizes(files)) sum += size;
console.log("sum", sum);

const settled = await Promise.allSettled([
  withRetry(async () => { throw new Error("always"); }, 1),
  Promise.resolve(7 as number),
]);
console.log(settled.map((s) => s.status));
const echo = await tools.echo({ value: [1, 2, 3] satisfies number[] });
return { echo, calls };
