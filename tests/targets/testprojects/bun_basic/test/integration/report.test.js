import { expect, test } from 'bun:test';
import { add } from '../../src/math.js';

test('sums a report', () => {
  expect([1, 2, 3].reduce(add, 0)).toBe(6);
});
