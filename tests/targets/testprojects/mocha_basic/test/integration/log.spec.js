const assert = require("node:assert");
const { parseReading, toFahrenheit } = require("../../lib/temperature");

describe("reading log", function () {
  it("converts a logged reading", function () {
    assert.strictEqual(toFahrenheit(parseReading("20 C")), 68);
  });
});
