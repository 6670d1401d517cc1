// Generic helpers, type guards, overloads, satisfies, as const and non-null assertions.
type Maybe<T> = T | null | undefined;
type Pair<A, B = A> = readonly [A, B];
type Keys<T> = { [K in keyof T]-?: K }[keyof T];
type Awaited2<T> = T extends Promise<infer U> ? U : T;

function isDefined<T>(value: Maybe<T>): value is T {
  return value !== null && value !== undefined;
}

function assertNumber(value: unknown, name: string): asserts value is number {
  if (typeof value !== "number") throw new TypeError(`${name} is not a number`);
}

function first<T>(items: readonly T[]): T | undefined;
function first<T>(items: readonly T[], fallback: T): T;
function first<T>(items: readonly T[], fallback?: T): T | undefined {
  return items.length > 0 ? items[0] : fallback;
}

const identity = <T,>(value: T): T => value;
const pair = <A, B>(a: A, b: B): Pair<A, B> => [a, b] as const;
const mapValues = <T extends object, R>(obj: T, fn: (v: T[keyof T], k: keyof T) => R): Record<keyof T, R> => {
  const out = {} as Record<keyof T, R>;
  for (const key of Object.keys(obj) as Array<keyof T>) {
    out[key] = fn(obj[key], key);
  }
  return out;
};

const config = {
  retries: 3,
  timeoutMs: 250,
  names: ["alpha", "beta"],
} satisfies Record<string, number | string[]>;

const mode = "fast" as const;
const values: Maybe<number>[] = [1, null, 3, undefined, 5];
const present = values.filter(isDefined);
console.log("present", present, "mode", mode);
console.log("first", first<number>([]), first([], 42), first(["x", "y"]));
console.log("identity", identity<string>("id"), pair(1, "one"));
const doubled = mapValues({ a: 1, b: 2, c: 3 }, (v: number) => v * 2);
console.log("doubled", doubled);
const lookup = new Map<string, number>([["one", 1]]);
const one = lookup.get("one")!;
console.log("one", one + 1, config.names!.length);
let total: number = 0;
for (const v of present) {
  assertNumber(v, "v");
  total += v;
}
const keysOf = <T extends object>(o: T) => Object.keys(o) as Keys<T>[];
console.log("keys", keysOf(config), "total", total);
const widen = (n: number): Awaited2<Promise<number>> => n * 10;
return [widen(total), typeof identity<number>];
