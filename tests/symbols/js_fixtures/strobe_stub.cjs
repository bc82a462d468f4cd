// The tracing runtime the transform calls, reduced to a recorder: `node --require strobe_stub.cjs program.js`
// with STROBE_RECORDS=<file> writes every call (id, this, arguments, returned or thrown) there at exit.
'use strict';
const fs = require('fs');

const records = [];
let describing = false; // a getter that describe() reads is not a call of the program: not recorded

function describe(value) {
  if (value === globalThis) return 'globalThis';
  if (value === undefined) return 'undefined';
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  if (typeof value === 'function') return `function ${value.name}`;
  if (value !== null && typeof value === 'object') {
    const proto = Object.getPrototypeOf(value);
    if (Array.isArray(value) || proto === Object.prototype || proto === null) {
      try {
        return JSON.stringify(value);
      } catch {
        return 'Object';
      }
    }
    return proto && proto.constructor ? proto.constructor.name : 'Object';
  }
  return JSON.stringify(value);
}

function quietly(value) {
  describing = true;
  try {
    return describe(value);
  } finally {
    describing = false;
  }
}

function enter(kind, id, self, args) {
  const entry = { kind, id, self: quietly(self), args: args === undefined ? null : Array.from(args, quietly) };
  records.push(entry);
  return entry;
}

globalThis.__strobe = {
  c(id, self, args, body) {
    if (describing) return body();
    const entry = enter('c', id, self, args);
    try {
      const value = body();
      entry.returned = quietly(value);
      return value;
    } catch (error) {
      entry.threw = quietly(error);
      throw error;
    }
  },
  async a(id, self, args, body) {
    if (describing) return body();
    const entry = enter('a', id, self, args);
    try {
      const value = await body();
      entry.returned = quietly(value);
      return value;
    } catch (error) {
      entry.threw = quietly(error);
      throw error;
    }
  },
};

process.on('exit', () => fs.writeFileSync(process.env.STROBE_RECORDS, JSON.stringify(records)));
