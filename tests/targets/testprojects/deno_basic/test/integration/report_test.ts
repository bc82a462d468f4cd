import assert from "node:assert/strict";
import { add } from "../../src/math.ts";

// Reading a file needs --allow-read: the project's `deno task test` grants it, so Strobe must too.
Deno.test("sums a report", async () => {
  const text = await Deno.readTextFile(new URL("./numbers.txt", import.meta.url));
  assert.equal(text.trim().split("\n").map(Number).reduce(add, 0), 6);
});
