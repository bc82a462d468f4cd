export function square(x) {
  return x * x;
}

export class Shape {
  constructor(side) {
    this.side = side;
  }

  area() {
    return square(this.side);
  }
}
