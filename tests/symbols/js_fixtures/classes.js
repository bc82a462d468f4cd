// Classes: static members, getters and setters, private methods, derived constructors, super, new.target.
class Shape {
  static count = 0;
  static registry = () => Shape.count;
  #secret = 'hidden';
  label = () => `shape#${this.id}`;

  constructor(name) {
    Shape.count += 1;
    this.name = name;
    this.id = Shape.count;
    this.kind = new.target.name;
  }

  static create(name) {
    return new this(name);
  }

  get description() {
    return `${this.name} (${this.#reveal()})`;
  }

  set description(value) {
    this.name = value.toUpperCase();
  }

  #reveal() {
    return this.#secret;
  }

  area() {
    throw new Error(`area of ${this.name} is unknown`);
  }
}

class Square extends Shape {
  constructor(side) {
    const check = () => { if (side < 0) throw new RangeError('negative side'); };
    check();
    super(`square ${side}`);
    this.side = side;
  }

  area() {
    return this.side * this.side;
  }

  describe() {
    return `${super.description}: ${this.area()}`;
  }
}

function Legacy() {
  if (!new.target) return 'called without new';
  this.made = new.target === Legacy;
}

const shape = Shape.create('blob');
shape.description = 'renamed';
console.log(shape.description, shape.kind, shape.label(), Shape.registry());
try {
  shape.area();
} catch (error) {
  console.log('caught:', error.message);
}
const square = new Square(3);
console.log(square.describe(), square.kind, square.area(), Shape.count);
try {
  new Square(-1);
} catch (error) {
  console.log('caught:', error.name, error.message);
}
console.log(Legacy(), new Legacy().made);
