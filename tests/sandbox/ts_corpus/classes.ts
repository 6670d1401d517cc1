// Classes: modifiers, generics, abstract members, overloads, parameter typing.
interface Shape {
  readonly kind: string;
  area(): number;
}

abstract class Base implements Shape {
  abstract readonly kind: string;
  protected static count: number = 0;
  private label?: string;
  declare extra: unknown;
  id!: number;

  constructor(label?: string) {
    this.label = label;
    Base.count += 1;
    this.id = Base.count;
  }

  abstract area(): number;

  public describe(this: Base, precision: number = 2): string {
    return `${this.kind}#${this.id}(${this.label ?? "unnamed"}) area=${this.area().toFixed(precision)}`;
  }

  static created(): number {
    return Base.count;
  }
}

class Circle extends Base {
  readonly kind = "circle";
  constructor(private_r: number, label?: string) {
    super(label);
    this.r = private_r;
  }
  private r: number;
  override area(): number {
    return Math.PI * this.r ** 2;
  }
}

class Rect extends Base implements Shape {
  public readonly kind: "rect" = "rect";
  constructor(public_w: number, public_h: number) {
    super();
    this.w = public_w;
    this.h = public_h;
  }
  protected w: number;
  protected h: number;
  area(): number {
    return this.w * this.h;
  }
}

class Registry<K extends string, V extends Shape> {
  [key: string]: unknown;
  private items = new Map<K, V>();
  add(key: K, value: V): this;
  add(key: K, value: V, replace: boolean): this;
  add(key: K, value: V, replace?: boolean): this {
    if (this.items.has(key) && !replace) throw new Error(`duplicate ${key}`);
    this.items.set(key, value);
    return this;
  }
  get size(): number {
    return this.items.size;
  }
  *entries(): Generator<[K, V]> {
    yield* this.items.entries();
  }
}

const reg = new Registry<"a" | "b" | "c", Shape>();
reg.add("a", new Circle(1, "unit")).add("b", new Rect(2, 3));
reg.add("c", new Circle(0.5));
for (const [key, shape] of reg.entries()) {
  console.log(key, (shape as Base).describe(3));
}
console.log("created", Base.created(), "size", reg.size);
try {
  reg.add("a", new Rect(1, 1));
} catch (e: unknown) {
  console.log("error:", (e as Error).message);
}
const total = [...reg.entries()].reduce<number>((sum, [, s]) => sum + s.area(), 0);
return { total: Math.round(total * 1000) / 1000, kinds: [...reg.entries()].map(([, s]) => s.kind) };
