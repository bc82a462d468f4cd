// A small library with two deliberate bugs for the adapter tests to find.

function add(a, b) {
  return a + b;
}

// Bug: divides by one too many.
function average(values) {
  const total = values.reduce((sum, v) => sum + v, 0);
  return total / (values.length + 1);
}

function parsePrice(text) {
  const value = Number(text);
  if (Number.isNaN(value)) {
    throw new Error(`not a price: ${text}`);
  }
  return value;
}

module.exports = { add, average, parsePrice };
