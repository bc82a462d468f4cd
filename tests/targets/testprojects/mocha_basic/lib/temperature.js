// Temperature helpers with two deliberate bugs for the adapter tests to find.

function toFahrenheit(celsius) {
  return celsius * 9 / 5 + 32;
}

// Bug: forgets to subtract 32 first.
function toCelsius(fahrenheit) {
  return fahrenheit * 5 / 9;
}

function parseReading(text) {
  const match = /^(-?\d+(?:\.\d+)?)\s*C$/.exec(text);
  if (!match) {
    throw new RangeError(`unreadable reading: ${text}`);
  }
  return Number(match[1]);
}

module.exports = { toFahrenheit, toCelsius, parseReading };
