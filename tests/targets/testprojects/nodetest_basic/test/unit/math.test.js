import { describe, it, test } from 'node:test';
import assert from 'node:assert/strict';
import { add, divide, parseRatio } from '../../src/math.js';

describe('math', () => {
  it('adds two numbers', () => {
    assert.equal(add(2, 3), 5);
  });

  it('divides exactly', () => {
    assert.equal(divide(7, 2), 3.5, 'divide(7, 2) should be 3.5');
  });

  it('parses an infinite ratio', () => {
    assert.equal(parseRatio('3/0'), Infinity);
  });

  it('multiplies later', { skip: 'not written yet' }, () => {});
});

// A todo test may fail without failing the run: Node reports it as todo, Strobe as skipped.
test('rounds halves', { todo: 'decide the rounding rule' }, () => {
  assert.equal(Math.round(2.5), 2);
});
