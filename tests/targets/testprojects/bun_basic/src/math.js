// A tiny library under test: one correct function, one with a bug (integer division), one that throws.
export function add(a, b) {
  return a + b;
}

export function divide(a, b) {
  return Math.trunc(a / b);
}

function checkDenominator(b) {
  if (b === 0) throw new RangeError('denominator must not be zero');
}

export function parseRatio(text) {
  const [a, b] = text.split('/').map(Number);
  checkDenominator(b);
  return a / b;
}
