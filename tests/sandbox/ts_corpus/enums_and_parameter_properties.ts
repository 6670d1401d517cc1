// Transformed, not erased: enums and constructor parameter properties.
enum Color { Red, Green = 5, Blue }
const enum Dir { Up = "UP", Down = "DOWN" }

class Point {
  constructor(public readonly x: number, private y: number = 2) {}
  sum(): number { return this.x + this.y }
}

class Point3 extends Point {
  constructor(x: number, protected z: number) {
    super(x)
  }
  total(): number { return this.sum() + this.z }
}

console.log(Color.Red, Color.Green, Color.Blue, Color[6])
console.log(Dir.Up, Object.keys(Color).join(","))
const p = new Point3(1, 10)
console.log(p.total(), JSON.stringify(p))
return Color.Blue
