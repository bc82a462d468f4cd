const assert = require("node:assert");
const { toFahrenheit, toCelsius, parseReading } = require("../../lib/temperature");

describe("temperature", function () {
  it("converts boiling water to Fahrenheit", function () {
    assert.strictEqual(toFahrenheit(100), 212);
  });

  it("converts body temperature to Celsius", function () {
    assert.strictEqual(toCelsius(98.6), 37, "98.6F should be 37C");
  });

  it("reads a Fahrenheit reading", function () {
    assert.strictEqual(parseReading("70 F"), 21);
  });

  it.skip("converts to Kelvin", function () {});

  it("averages readings");
});
