'use strict';
/**
 * Values of a traced Node.js program as bounded JSON-ready data, read without running the program's code.
 *
 * Part of the preload Strobe puts into traced node processes (see preload.cjs). Plain Node built-ins only.
 *
 *   const r = new Renderer(3);            // containers expanded 3 levels deep
 *   r.event(); r.render(new Map([[1, 'a']]))   // {"__type__": "Map", "size": 1, "entries": [[1, "a"]]}
 *   describeThrown(new TypeError('no'))   // {type: "TypeError", message: "no", line: 12}
 *   parseStack(err.stack)                 // [{function, file, line, column}, ...] innermost first, as V8 wrote it
 *
 * Nothing here invokes a getter, a Proxy trap, toString/valueOf/toJSON or any other user function: properties are
 * read through their descriptors (an accessor renders as a marker), built-in internals through the built-ins' own
 * getters captured when this file loads, Proxies are recognised natively and not looked into. An object that throws
 * anyway while being read renders as {"__type__": kind, "error": "not captured: why"}. Strings are made well formed
 * (a lone surrogate becomes U+FFFD: the host's JSON parser refuses them).
 */

const { types } = require('util');
const { Buffer } = require('buffer');
const { fileURLToPath } = require('url');

const MAX_ITEMS = 32; // array items, object keys, Map/Set entries, arguments
const MAX_CHARS = 256; // a string value; a key
const EVENT_CHARS = 4096; // about this much JSON per event's values, then the rest is cut
const BYTES_SHOWN = 32;
const MAX_DEPTH = 10;
const CUT = '…cut (values over ' + EVENT_CHARS + ' chars in this event)';
const CIRCULAR = '[Circular]';
const UNDEFINED = Object.freeze({ __type__: 'undefined' });
const UNDEFINED_JSON = '{"__type__":"undefined"}';
const HOLE = Object.freeze({ __type__: 'hole' });
const GETTER = Object.freeze({ __type__: 'getter', error: 'not captured: getters are not invoked' });
const PROXY = Object.freeze({ __type__: 'Proxy', error: 'not captured: a Proxy is not introspected (its traps would run)' });

const getOwn = Object.getOwnPropertyDescriptor;
const protoOf = Object.getPrototypeOf;
const ownKeys = Object.keys;
const defineProperty = Object.defineProperty;
const isArray = Array.isArray;
const uncurry = (fn) => Function.prototype.call.bind(fn);
const getter = (proto, key) => uncurry(getOwn(proto, key).get);
const {
  isProxy, isDate, isRegExp, isMap, isSet, isWeakMap, isWeakSet, isPromise, isNativeError, isTypedArray,
  isArrayBuffer, isSharedArrayBuffer, isDataView, isNumberObject, isStringObject, isBooleanObject,
  isBigIntObject, isSymbolObject, isModuleNamespaceObject,
} = types;

const TYPED_ARRAY = protoOf(Uint8Array.prototype);
const taTag = getter(TYPED_ARRAY, Symbol.toStringTag);
const taLength = getter(TYPED_ARRAY, 'length');
const taBuffer = getter(TYPED_ARRAY, 'buffer');
const taOffset = getter(TYPED_ARRAY, 'byteOffset');
const taBytes = getter(TYPED_ARRAY, 'byteLength');
const abBytes = getter(ArrayBuffer.prototype, 'byteLength');
const sabBytes = getter(SharedArrayBuffer.prototype, 'byteLength');
const dvBuffer = getter(DataView.prototype, 'buffer');
const dvOffset = getter(DataView.prototype, 'byteOffset');
const dvBytes = getter(DataView.prototype, 'byteLength');
const mapSize = getter(Map.prototype, 'size');
const setSize = getter(Set.prototype, 'size');
const mapEntries = uncurry(Map.prototype.entries);
const setValues = uncurry(Set.prototype.values);
const mapNext = uncurry(protoOf(new Map().entries()).next);
const setNext = uncurry(protoOf(new Set().values()).next);
const dateTime = uncurry(Date.prototype.getTime);
const dateIso = uncurry(Date.prototype.toISOString);
const reSource = getter(RegExp.prototype, 'source');
const reFlags = ['hasIndices', 'global', 'ignoreCase', 'multiline', 'dotAll', 'unicode', 'unicodeSets', 'sticky']
  .filter((name) => getOwn(RegExp.prototype, name))
  .map((name) => [getter(RegExp.prototype, name), { hasIndices: 'd', unicodeSets: 'v' }[name] || name[0]]);
const symbolDescription = getter(Symbol.prototype, 'description');
const BOXED = [
  [isNumberObject, uncurry(Number.prototype.valueOf), 'Number'],
  [isStringObject, uncurry(String.prototype.valueOf), 'String'],
  [isBooleanObject, uncurry(Boolean.prototype.valueOf), 'Boolean'],
  [isBigIntObject, uncurry(BigInt.prototype.valueOf), 'BigInt'],
  [isSymbolObject, uncurry(Symbol.prototype.valueOf), 'Symbol'],
];
const ObjectProto = Object.prototype;
const ArrayProto = Array.prototype;
const BufferProto = Buffer.prototype;
const HEX = Array.from({ length: 256 }, (_, b) => (b < 16 ? '0' : '') + b.toString(16));
const stringify = JSON.stringify;
const NODE_PREPARE_STACK = Error.prepareStackTrace; // Node's own formatter (or undefined), as the program started

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
/** Whether a string has no lone surrogate (String.prototype.isWellFormed before Node 20: a regular expression). */
const isWellFormed = String.prototype.isWellFormed
  ? uncurry(String.prototype.isWellFormed)
  : (s) => !LONE_SURROGATE.test(s) || ((LONE_SURROGATE.lastIndex = 0), false);
const toWellFormed = String.prototype.toWellFormed
  ? uncurry(String.prototype.toWellFormed)
  : (s) => s.replace(LONE_SURROGATE, '\ufffd');

/** A string made well formed (lone surrogates as U+FFFD), cut to `max` chars with "…(N chars)". */
function text(value, max = MAX_CHARS) {
  let s = isWellFormed(value) ? value : toWellFormed(value);
  if (s.length > max) {
    let end = max;
    const code = s.charCodeAt(end - 1);
    if (code >= 0xd800 && code <= 0xdbff) end -= 1; // never split a surrogate pair
    s = s.slice(0, end) + '…(' + value.length + ' chars)';
  }
  return s;
}

/** The value of a data property `key` found along the prototype chain, GETTER for an accessor, undefined when
 * absent; stops at a Proxy (undefined). */
function dataProperty(obj, key) {
  for (let o = obj, steps = 0; o !== null && steps < 64; o = protoOf(o), steps++) {
    if (isProxy(o)) return undefined;
    const found = getOwn(o, key);
    if (found !== undefined) return 'value' in found ? found.value : GETTER;
  }
  return undefined;
}

function functionName(fn) {
  const found = isProxy(fn) ? undefined : getOwn(fn, 'name');
  return found !== undefined && typeof found.value === 'string' ? text(found.value, 200) : '';
}

/** The name of the constructor owning the first prototype (from `proto`) with a data `constructor`. */
function constructorName(proto) {
  for (let o = proto, steps = 0; o !== null && steps < 64; o = protoOf(o), steps++) {
    if (isProxy(o)) return 'Object';
    const found = getOwn(o, 'constructor');
    if (found !== undefined && 'value' in found && typeof found.value === 'function') {
      return functionName(found.value) || 'Object';
    }
  }
  return 'Object';
}

const names = new WeakMap(); // prototype -> its constructor's name (a class's prototype rarely changes)

function cachedName(proto) {
  if (proto === null) return 'Object';
  let name = names.get(proto);
  if (name === undefined) {
    name = constructorName(proto);
    names.set(proto, name);
  }
  return name;
}

// Another realm's Object.prototype and Array.prototype (a vm context's: Jest's test environment, Vitest's vm pools)
// count as the plain ones: a plain object or array made there is rendered as one made here.
const plainProtos = new WeakSet([ObjectProto]);
const arrayProtos = new WeakSet([ArrayProto]);
function isObjectProto(proto) {
  if (proto === ObjectProto || plainProtos.has(proto)) return true;
  if (proto === null || protoOf(proto) !== null || cachedName(proto) !== 'Object') return false;
  plainProtos.add(proto);
  return true;
}
function isArrayProto(proto) {
  if (proto === ArrayProto || arrayProtos.has(proto)) return true;
  if (proto === null || !isArray(proto) || cachedName(proto) !== 'Array' || !isObjectProto(protoOf(proto))) return false;
  arrayProtos.add(proto);
  return true;
}

function inChain(obj, proto) {
  for (let o = protoOf(obj), steps = 0; o !== null && steps < 64; o = protoOf(o), steps++) {
    if (o === proto) return true;
    if (isProxy(o)) return false;
  }
  return false;
}

function hex(bytes, count) {
  let out = '';
  for (let i = 0; i < count; i++) out += HEX[bytes[i]];
  return out;
}

function errorText(error) {
  try {
    const d = describeThrown(error, false);
    return d.message ? d.type + ': ' + text(d.message, 200) : d.type;
  } catch {
    return 'unknown error';
  }
}

/** Renderings bounded by `depth` levels of containers, MAX_ITEMS entries each, MAX_CHARS per string and about
 * EVENT_CHARS per event: call event() before the values of each event. One renderer per thread (no user code runs
 * while it works, so it is never re-entered). */
class Renderer {
  constructor(depth = 3) {
    this.depth = Number.isInteger(depth) ? Math.max(0, Math.min(MAX_DEPTH, depth)) : 3;
    this.left = EVENT_CHARS;
    this.seen = [];
  }

  event() {
    this.left = EVENT_CHARS;
    if (this.seen.length) this.seen.length = 0;
  }

  get exhausted() {
    return this.left <= 0;
  }

  /** JSON text of the rendering (primitives written directly: the common case, ~3x cheaper than stringify). */
  json(value) {
    switch (typeof value) {
      case 'number':
        this.left -= 8;
        return value - value === 0 ? '' + value : '"' + value + '"';
      case 'boolean':
        this.left -= 5;
        return value ? 'true' : 'false';
      case 'undefined':
        this.left -= 24;
        return UNDEFINED_JSON;
      case 'string':
        if (value.length <= MAX_CHARS && this.left > 0 && isWellFormed(value)) {
          this.left -= value.length + 2;
          return stringify(value);
        }
        break;
      default:
        if (value === null) {
          this.left -= 4;
          return 'null';
        }
    }
    return stringify(this.render(value, 0));
  }

  render(value, level = 0) {
    switch (typeof value) {
      case 'number':
        this.left -= 8;
        return value - value === 0 ? value : String(value); // NaN, Infinity, -Infinity as strings
      case 'string':
        if (this.left <= 0) return CUT;
        this.left -= value.length > MAX_CHARS ? MAX_CHARS + 16 : value.length + 2;
        return text(value);
      case 'boolean':
        this.left -= 5;
        return value;
      case 'undefined':
        this.left -= 24;
        return UNDEFINED;
      case 'bigint': {
        if (this.left <= 0) return CUT;
        const digits = value.toString();
        this.left -= 40 + Math.min(digits.length, MAX_CHARS);
        return { __type__: 'bigint', value: text(digits) };
      }
      case 'symbol':
        this.left -= 40;
        return { __type__: 'symbol', description: this._symbol(value) };
      case 'function':
        this.left -= 40;
        return isProxy(value) ? PROXY : { __type__: 'function', name: functionName(value) };
      default:
        if (value === null) {
          this.left -= 4;
          return null;
        }
        if (this.left <= 0) return CUT;
        return this._object(value, level);
    }
  }

  _symbol(value) {
    const description = symbolDescription(value);
    return typeof description === 'string' ? text(description, 200) : null;
  }

  _object(value, level) {
    if (isProxy(value)) {
      this.left -= 90;
      return PROXY;
    }
    const seen = this.seen;
    if (seen.includes(value)) {
      this.left -= 12;
      return CIRCULAR;
    }
    let kind = 'object';
    seen.push(value);
    try {
      this.left -= 16;
      const proto = protoOf(value);
      if (isObjectProto(proto)) { // the common case: no built-in kind to look for
        kind = 'Object';
        return level < this.depth ? this._fields(value, level + 1, {}) : { __type__: 'Object', '…': 'depth' };
      }
      kind = isArrayProto(proto) ? 'Array' : cachedName(proto);
      if (kind === 'Object' && isArray(value)) kind = 'Array';
      return this._kind(value, level, kind);
    } catch (error) {
      return { __type__: kind, error: 'not captured: ' + errorText(error) };
    } finally {
      seen.pop();
    }
  }

  _kind(value, level, kind) {
    const deep = level < this.depth;
    if (isArray(value)) {
      const length = value.length;
      const plain = isArrayProto(protoOf(value));
      if (!deep) return { __type__: kind, length, '…': 'depth' };
      const items = this._items(value, length, level + 1);
      return plain ? items : { __type__: kind, length, items };
    }
    if (isTypedArray(value)) {
      const name = inChain(value, BufferProto) ? 'Buffer' : taTag(value);
      const bytes = taBytes(value);
      const view = new Uint8Array(taBuffer(value), taOffset(value), Math.min(bytes, BYTES_SHOWN));
      this.left -= 40 + 2 * view.length;
      return { __type__: name, length: taLength(value), hex: hex(view, view.length) + (bytes > BYTES_SHOWN ? '…' : '') };
    }
    if (isArrayBuffer(value) || isSharedArrayBuffer(value)) {
      const bytes = isArrayBuffer(value) ? abBytes(value) : sabBytes(value);
      const view = new Uint8Array(value, 0, Math.min(bytes, BYTES_SHOWN));
      this.left -= 40 + 2 * view.length;
      return { __type__: kind, length: bytes, hex: hex(view, view.length) + (bytes > BYTES_SHOWN ? '…' : '') };
    }
    if (isDataView(value)) {
      const bytes = dvBytes(value);
      const view = new Uint8Array(dvBuffer(value), dvOffset(value), Math.min(bytes, BYTES_SHOWN));
      this.left -= 40 + 2 * view.length;
      return { __type__: 'DataView', length: bytes, hex: hex(view, view.length) + (bytes > BYTES_SHOWN ? '…' : '') };
    }
    if (isDate(value)) {
      const time = dateTime(value);
      this.left -= 40;
      return { __type__: kind, value: time - time === 0 ? dateIso(value) : 'Invalid Date' };
    }
    if (isNativeError(value) || inChain(value, Error.prototype)) return this._error(value, level, kind, deep);
    if (isMap(value)) {
      const size = mapSize(value);
      if (!deep) return { __type__: kind, size, '…': 'depth' };
      return { __type__: kind, size, entries: this._iterated(mapEntries(value), mapNext, size, level + 1, true) };
    }
    if (isSet(value)) {
      const size = setSize(value);
      if (!deep) return { __type__: kind, size, '…': 'depth' };
      return { __type__: kind, size, values: this._iterated(setValues(value), setNext, size, level + 1, false) };
    }
    if (isRegExp(value)) {
      let flags = '';
      for (const [read, letter] of reFlags) if (read(value)) flags += letter;
      const source = text('/' + reSource(value) + '/' + flags);
      this.left -= 30 + source.length;
      return { __type__: kind, value: source };
    }
    for (const [is, unbox, name] of BOXED) {
      if (is(value)) return { __type__: name, value: this.render(unbox(value), level) };
    }
    if (isPromise(value) || isWeakMap(value) || isWeakSet(value)) {
      return { __type__: kind, '…': 'contents not readable' };
    }
    return this._plain(value, level, isModuleNamespaceObject(value) ? 'Module' : kind, deep);
  }

  _items(array, length, level) {
    const out = [];
    const shown = Math.min(length, MAX_ITEMS);
    for (let i = 0; i < shown; i++) {
      if (this.left <= 0) {
        out.push(CUT);
        return out;
      }
      const found = getOwn(array, i);
      out.push(found === undefined ? HOLE : 'value' in found ? this.render(found.value, level) : GETTER);
    }
    if (length > shown) out.push('…' + (length - shown) + ' more');
    return out;
  }

  _iterated(iterator, next, size, level, pairs) {
    const out = [];
    for (let step = next(iterator); !step.done; step = next(iterator)) {
      if (out.length === MAX_ITEMS) {
        out.push('…' + (size - MAX_ITEMS) + ' more');
        break;
      }
      if (this.left <= 0) {
        out.push(CUT);
        break;
      }
      const item = step.value;
      out.push(pairs ? [this.render(item[0], level), this.render(item[1], level)] : this.render(item, level));
    }
    return out;
  }

  _error(value, level, kind, deep) {
    const out = { __type__: kind };
    for (const key of ['name', 'message']) {
      const found = dataProperty(value, key);
      if (found !== undefined) out[key] = typeof found === 'string' ? text(found, 500) : this.render(found, level + 1);
      this.left -= 20 + (typeof found === 'string' ? Math.min(found.length, 500) : 0);
    }
    return deep ? this._fields(value, level + 1, out, true) : out;
  }

  _plain(value, level, kind, deep) {
    const proto = protoOf(value);
    const type = isObjectProto(proto) ? null : proto === null && kind !== 'Module' ? 'Object: null prototype' : kind;
    if (!deep) return { __type__: type || 'Object', '…': 'depth' };
    const out = type === null ? {} : { __type__: type };
    return this._fields(value, level + 1, out);
  }

  /** The first MAX_ITEMS own enumerable string-keyed properties into `out` (accessors as GETTER). */
  _fields(value, level, out, isError = false) {
    const keys = ownKeys(value);
    const shown = Math.min(keys.length, MAX_ITEMS);
    for (let i = 0; i < shown; i++) {
      if (this.left <= 0) {
        out['…'] = CUT;
        return out;
      }
      const key = keys[i];
      if (isError && key === 'stack') continue;
      const name = text(key);
      this.left -= name.length + 4;
      let item;
      try {
        const found = getOwn(value, key);
        item = found === undefined ? UNDEFINED : 'value' in found ? this.render(found.value, level) : GETTER;
      } catch (error) {
        item = { __type__: 'unknown', error: 'not captured: ' + errorText(error) };
      }
      if (name === '__proto__') {
        defineProperty(out, name, { value: item, enumerable: true, writable: true, configurable: true });
      } else {
        out[name] = item;
      }
    }
    if (keys.length > shown) out['…'] = keys.length - shown + ' more keys';
    return out;
  }
}

const FRAME = /^\s*at (?:(.+?) \()?(.+?)(?::(\d+):(\d+))?\)?$/;

function framePath(file) {
  if (file.startsWith('file://')) {
    try {
      return fileURLToPath(file);
    } catch {
      return file;
    }
  }
  return file;
}

/** The frames of a V8 stack text, innermost first: {function, file, line, column} (line/column null when absent),
 * as the program wrote them: a wrapped function's body runs in an anonymous arrow called by this preload, whose
 * frames are folded back into one frame named after the function, where the body was. */
function parseStack(stack, limit = 50) {
  const frames = [];
  if (typeof stack !== 'string') return frames;
  for (const line of stack.split('\n')) {
    if (frames.length >= limit) break;
    if (!/^\s+at /.test(line)) continue;
    const match = FRAME.exec(line);
    if (match === null) continue;
    frames.push({
      function: text(match[1] || '<anonymous>', 200),
      file: text(framePath(match[2]), 500),
      line: match[3] === undefined ? null : Number(match[3]),
      column: match[4] === undefined ? null : Number(match[4]),
    });
  }
  return foldWrappers(frames);
}

const OWN_DIRECTORY = __dirname + require('node:path').sep;

function foldWrappers(frames) {
  const out = [];
  for (let i = 0; i < frames.length; i++) {
    const frame = frames[i];
    if (frame.file.startsWith(OWN_DIRECTORY)) continue;
    let next = i + 1;
    while (next < frames.length && frames[next].file.startsWith(OWN_DIRECTORY)) next++;
    if (frame.function === '<anonymous>' && next > i + 1 && next < frames.length && frames[next].file === frame.file) {
      out.push({ ...frame, function: frames[next].function }); // the body, under its function's name
      i = next; // the wrapper's own frame
      continue;
    }
    out.push(frame);
  }
  return out;
}

/** The stack text of an Error when reading it runs no program code (Error.prepareStackTrace is still Node's), or
 * with `always` (a crash: Node formats it to print it anyway). */
const trustedFormatters = new Set(); // stack formatters of loaders, safe to run before the program reads a stack

/** `formatter` (ts-node's source-map-support) may format an error's stack for the recorder: what it makes is what
 * the program reads of that stack too. */
function trustStackFormatter(formatter) {
  trustedFormatters.add(formatter);
}

function stackOf(error, always) {
  const formatter = Error.prepareStackTrace;
  if (!always && formatter !== NODE_PREPARE_STACK && !trustedFormatters.has(formatter)) return undefined;
  const found = getOwn(error, 'stack');
  return found !== undefined && 'value' in found && typeof found.value === 'string' ? found.value : undefined;
}

/** A thrown value as {type, message, line} (`line`: the first frame with a line in its stack, else null), and
 * with `withStack`, its `stack` text when readable. */
function describeThrown(error, withStack = true, always = false) {
  if (error === null || (typeof error !== 'object' && typeof error !== 'function')) {
    const type = error === null ? 'null' : typeof error;
    let message = '';
    if (typeof error === 'string') message = error;
    else if (typeof error === 'symbol') message = 'Symbol(' + (symbolDescription(error) ?? '') + ')';
    else if (error !== undefined && error !== null) message = String(error); // a primitive: no user code
    return { type, message: text(message, 500), line: null };
  }
  if (isProxy(error)) return { type: 'Proxy', message: 'not captured: a Proxy is not introspected', line: null };
  const name = dataProperty(error, 'name');
  const message = dataProperty(error, 'message');
  const type = typeof name === 'string' && name ? name : constructorName(protoOf(error)) || typeof error;
  const out = { type: text(type, 200), message: typeof message === 'string' ? text(message, 500) : '', line: null };
  if (withStack) {
    const stack = stackOf(error, always);
    const frame = parseStack(stack, 20).find((f) => f.line !== null);
    if (frame !== undefined) out.line = frame.line;
    if (always) out.stack = stack;
  }
  return out;
}

module.exports = {
  Renderer, describeThrown, parseStack, text, stringify, trustStackFormatter, EVENT_CHARS, MAX_ITEMS, MAX_CHARS, CUT,
  UNDEFINED,
};
