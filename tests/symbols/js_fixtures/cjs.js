'use strict';
// CommonJS: exports, module.exports properties, prototype methods, nested functions, anonymous callbacks.
const path = require('path');

function parseArgs(argv, ...rest) {
  function normalize(arg) {
    return String(arg).trim();
  }
  return argv.map(normalize).concat(rest);
}

const joinAll = function (parts) { return parts.join(path.posix.sep); };
let shout = (text) => text.toUpperCase();
var whisper = text => { return text.toLowerCase(); };

exports.greet = function (name = 'world') {
  return `hello ${name}`;
};
module.exports.farewell = (name) => `bye ${name}`;

function Counter(start) {
  this.count = start;
  this.bump = function () { return ++this.count; };
}
Counter.prototype.reset = function () { this.count = 0; return this; };

module.exports.Counter = Counter;
module.exports.parseArgs = parseArgs;

const doubled = [1, 2, 3].map((x) => x * 2); // an anonymous callback: not indexed

if (require.main === module) {
  console.log(parseArgs([' a ', 'b '], 'c', 'd'));
  console.log(joinAll(['x', 'y']), shout('up'), whisper('DOWN'));
  console.log(exports.greet(), exports.greet('you'), module.exports.farewell('them'));
  const counter = new Counter(5);
  console.log(counter.bump(), counter.bump(), counter.reset().count, doubled);
}
