// What a wrapper must not change: directives, mapped arguments, new.target, super in object literals,
// empty bodies, nested arrows that end where their function ends, var redeclaring a parameter, odd throws.
function sloppyThis() { return this === globalThis; }
function strictThis() { 'use strict'
  return this === undefined; }
function mapped(a, b) { arguments[0] = 'changed'; b = 'also'; return [a, arguments[1], arguments.length]; }
function empty() {}
function nestedEnd(n) { const add = (m) => n + m
  return add(1) }
function defaultsTo(options) { var options = options || { fallback: true }; return options; }
function maker() { return new.target ? 'constructed' : 'called'; }
const base = { greet() { return 'base'; } };
const child = { __proto__: base, greet() { return `child of ${super.greet()}`; } };
const thrower = () => { throw 42; };
const asyncDouble = async (x) => x * 2;
const asyncThrow = async function () { await null; throw new SyntaxError('late'); };
function* gen() { yield 1; }
const obj = { get value() { return this._v ?? 'unset'; }, set value(v) { this._v = `set ${v}`; } };
class Base { constructor(tag) { this.tag = tag; } static make() { return new this('made'); } }
class Derived extends Base { constructor() { super('derived'); this.ready = this.tag === 'derived'; } }
const label = (x) => { outer: for (;;) { for (;;) { if (x) break outer; return 'no'; } } return 'broke out'; };

console.log(sloppyThis(), strictThis(), mapped(1, 2, 3), empty(), nestedEnd(1), defaultsTo(), defaultsTo(5));
console.log(maker(), new maker() instanceof maker, child.greet(), [...gen()], label(true));
try { thrower(); } catch (value) { console.log('threw', value); }
obj.value = 3;
console.log(obj.value, Base.make().tag, new Derived().ready);
asyncDouble(21).then((value) => console.log('async', value));
asyncThrow().catch((error) => console.log('async threw', error.name, error.message));
