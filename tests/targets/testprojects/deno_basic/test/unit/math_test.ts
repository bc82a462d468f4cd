import assert from "node:assert/strict";
import { add, divide, parseRatio } from "../../src/math.ts";

Deno.test("adds two numbers", () => {
  assert.equal(add(2, 3), 5);
});

Deno.test("divides exactly", () => {
  assert.equal(divide(7, 2), 3.5, "divide(7, 2) should be 3.5");
});

Deno.test("parses an infinite ratio", () => {
  assert.equal(parseRatio("3/0"), Infinity);
});

Deno.test({ name: "multiplies later", ignore: true, fn() {} });

Deno.test("rounding", async (t) => {
  await t.step("keeps integers", () => {
    assert.equal(Math.round(2), 2);
  });
  await t.step("rounds halves up", () => {
    assert.equal(Math.round(2.5), 2, "Math.round(2.5) should be 2");
  });
});
