const { add, parsePrice } = require("../../src/calc");

test("totals a basket", () => {
  expect(add(parsePrice("1.5"), parsePrice("2.5"))).toBe(4);
});
