// Example workspace file: a typed report builder.
interface Row {
  name: string;
  count: number;
}

export function report(rows: Row[]): string {
  // TODO: sort rows by count, descending
  return rows.map((r) => `${r.name}: ${r.count}`).join("\n");
}
