import { expect, test } from "vitest";
import { Inventory, parseSku } from "../../src/inventory.js";

test("restocks a sold-out item", () => {
  const inv = new Inventory();
  inv.receive(parseSku("XYZ-042"), 5);
  expect(inv.count("XYZ-042")).toBe(5);
});
