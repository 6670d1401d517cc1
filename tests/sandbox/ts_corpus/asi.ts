// No semicolons: erased constructs between statements must not join lines.
let a = 1
type Alias = number
(function () { a += 1 })()
console.log("after type alias", a)

const b = 2 as number
;[b, a].forEach((v) => console.log("each", v))

let c = "x" as string
(() => console.log("as then paren"))()

interface Marker { m: true }
`template ${a}`.length
let d: number = 5
declare const shadow: number
[d].map((v) => console.log("declare then bracket", v))

function overload(x: string): string
function overload(x: number): number
function overload(x: any) { return x }
(overload as (x: number) => number)(3)
console.log("overloads ok", overload(4))

let e = d satisfies number
+1
console.log("satisfies then plus", e)

class Fields {
  declare hidden: string
  value = 1
  declare other: number
  ["computed"]() { return this.value + 1 }
  static readonly tag = "f";
  *gen() { yield Fields.tag }
}
const f = new Fields()
console.log(f.computed(), [...f.gen()], c)
const maker: ((s: string) => string) | undefined = (s) => `made ${s}`
let g = maker!
("non-null then paren is a call in TS too")
console.log(g)
