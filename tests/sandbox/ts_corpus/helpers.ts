// Type-heavy helpers: discriminated unions, narrowing, Records, declarations.
import type { Something } from "elsewhere";
import { type OtherThing } from "elsewhere";
export type { Something };
declare const process: { env: Record<string, string | undefined> };
declare function externalHelper(x: number): number;
namespace Types {
  export interface Point { x: number; y: number }
  export type Id = string;
}

type Event =
  | { type: "click"; x: number; y: number }
  | { type: "key"; key: string; shift?: boolean }
  | { type: "scroll"; delta: number };

interface Counter<K extends string = string> {
  counts: Record<K, number>;
  total: number;
}

function describe(event: Event): string {
  switch (event.type) {
    case "click":
      return `click at ${event.x},${event.y}`;
    case "key":
      return `key ${event.shift ? event.key.toUpperCase() : event.key}`;
    case "scroll":
      return `scroll by ${event.delta}`;
  }
}

function count<K extends string>(items: readonly K[]): Counter<K> {
  const counts = {} as Record<K, number>;
  for (const item of items) counts[item] = (counts[item] ?? 0) + 1;
  return { counts, total: items.length };
}

const events: Event[] = [
  { type: "click", x: 1, y: 2 },
  { type: "key", key: "a", shift: true },
  { type: "scroll", delta: -3 },
  { type: "key", key: "b" },
];
for (const e of events) console.log(describe(e));
const c: Counter<Event["type"]> = count(events.map((e) => e.type));
console.log(c.counts, c.total);

const origin: Types.Point = { x: 0, y: 0 };
const id: Types.Id = "p-1";
const grouped = events.reduce<Record<string, Event[]>>((acc, e) => {
  (acc[e.type] ??= []).push(e);
  return acc;
}, {});
console.log(Object.keys(grouped).join(","), origin, id);

const table = new Map<string, Set<number>>();
for (const [i, e] of events.entries()) {
  if (!table.has(e.type)) table.set(e.type, new Set<number>());
  table.get(e.type)!.add(i);
}
console.log([...table].map(([k, v]) => `${k}:${[...v].join("|")}`));
const unknownValue: unknown = JSON.parse('{"nested": {"deep": [1, 2, {"x": null}]}}');
const deep = (unknownValue as { nested: { deep: unknown[] } }).nested.deep;
console.log(deep.length, typeof deep[2]);
