import { describe, expect, it, test } from 'bun:test';
import { add, divide, parseRatio } from '../../src/math.js';

describe('math', () => {
  it('adds two numbers', () => {
    expect(add(2, 3)).toBe(5);
  });

  it('divides exactly', () => {
    expect(divide(7, 2)).toBe(3.5);
  });

  it('parses an infinite ratio', () => {
    expect(parseRatio('3/0')).toBe(Infinity);
  });

  it.skip('multiplies later', () => {});
});

test.todo('rounds halves');
