// Arrows with block and expression bodies, object literal methods, arguments of the enclosing function.
const add = (a, b) => a + b;
const square = x => x * x;
const makePoint = (x, y) => ({ x, y });
const curry = (a) => (b) => a * 10 + b;
const total = (...values) => {
  return values.reduce((sum, value) => sum + value, 0);
};
const swap = ([first, second]) => [second, first];

function outer() {
  const inner = () => arguments.length;
  return inner();
}

const calculator = {
  base: 100,
  plus(n) { return this.base + n; },
  minus: function (n) { return this.base - n; },
  times: (n) => n * 2,
  nested: {
    half(n) { return n / 2; },
  },
};

console.log(add(1, 2), square(4), makePoint(1, 2), curry(3)(4), total(1, 2, 3), swap([1, 2]));
console.log(outer(1, 2, 3), calculator.plus(1), calculator.minus(1), calculator.times(4), calculator.nested.half(9));
