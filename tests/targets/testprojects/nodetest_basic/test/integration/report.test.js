import { test } from 'node:test';
import assert from 'node:assert/strict';
import { add } from '../../src/math.js';

test('sums a report', () => {
  assert.equal([1, 2, 3].reduce(add, 0), 6);
});
