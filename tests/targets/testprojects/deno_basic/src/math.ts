// A tiny library under test: one correct function, one with a bug (integer division), one that throws.
export function add(a: number, b: number): number {
  return a + b;
}

export function divide(a: number, b: number): number {
  return Math.trunc(a / b);
}

function checkDenominator(b: number): void {
  if (b === 0) throw new RangeError("denominator must not be zero");
}

export function parseRatio(text: string): number {
  const [a, b] = text.split("/").map(Number);
  checkDenominator(b);
  return a / b;
}
