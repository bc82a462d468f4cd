'use strict';
/**
 * `globalThis.__strobe`: what the daemon's rewritten functions call, and the events their calls become.
 *
 * A rewritten function's body is `return __strobe.c(ID, this, arguments, () => { BODY })`, or with `a` and an async
 * arrow for an async function; an arrow passes the array of its parameters (or undefined) instead of `arguments`.
 *
 *   const rec = new Recorder(outbox, 0);    // thread id 0: the main thread
 *   rec.setPlan(plan);                       // which ids are on, their parameter names, the depth
 *   globalThis.__strobe = {c: rec.c, a: rec.a};
 *
 * An id that is not on costs one Set lookup: `return body()`. For one that is on, an event is
 * `[kind, id, ts_ns, tid, seq, parent_seq, payload]`:
 *   1 enter   {"args": [[name, value], ...]} ({} when the arrow passed undefined)
 *   2 return  {"return": value, "enter": enter_seq, "duration": ns}
 *   3 unwind  {"exception": {"type", "message", "line"}, "enter": enter_seq, "duration": ns}
 *   9 crash   {"type", "message", "origin", "thread", "traceback": [{"function", "file", "line", "column"}, ...]}
 *             (outermost frame first; id 0)
 * ts_ns is CLOCK_MONOTONIC (process.hrtime.bigint()), tid worker_threads.threadId, seq the process's (shared by its
 * threads), parent_seq the innermost traced call open on this thread when the event happened (0 if none); an exit's
 * parent is its enter's. An async call (`a`) is open for its synchronous part only; its exit is recorded when its
 * promise settles, and the caller gets the promise that settles right after (same value or same rejection reason).
 * Return values keep their identity, exceptions are rethrown as the same object.
 */

const { types } = require('util');
const { Renderer, describeThrown, parseStack, text, stringify, EVENT_CHARS, CUT } = require('./values.cjs');

const MAX_ARGS = 32;
const MAX_PAYLOAD = 4 * EVENT_CHARS + 1024; // a payload over this (escaped text) is replaced by a note
const hrtime = process.hrtime.bigint;
const promiseThen = Promise.prototype.then;
const { isPromise } = types;

class Recorder {
  constructor(outbox, tid) {
    this.out = outbox;
    this.tid = tid;
    this.on = new Set();
    this.names = new Map();
    this.encoded = new Map(); // id -> its names as JSON text
    this.renderer = new Renderer(3);
    this.stack = []; // enter seqs of the open traced calls of this thread, innermost last
    this.depth = 0;
    this.c = this.c.bind(this);
    this.a = this.a.bind(this);
  }

  setPlan(plan) {
    this.on = plan.on;
    this.names = plan.names;
    this.encoded = new Map();
    if (plan.depth !== this.renderer.depth) this.renderer = new Renderer(plan.depth);
    this.out.limits(plan.maxBuffered, plan.flushAt);
  }

  /** A synchronous function's call. */
  c(id, self, args, body) {
    if (!this.on.has(id)) return body();
    const ts = Number(hrtime());
    const parent = this.depth ? this.stack[this.depth - 1] : 0;
    const seq = this._enter(id, ts, parent, args);
    let value;
    try {
      value = body();
    } catch (error) {
      this._close(seq);
      this._unwind(id, ts, seq, parent, error);
      throw error; // Strobe's tracer rethrows the program's exception unchanged; its own stack shows where it came from
    }
    this._close(seq);
    this._return(id, ts, seq, parent, value);
    return value;
  }

  /** An async function's call: its exit when the promise it returns settles. */
  a(id, self, args, body) {
    if (!this.on.has(id)) return body();
    const ts = Number(hrtime());
    const parent = this.depth ? this.stack[this.depth - 1] : 0;
    const seq = this._enter(id, ts, parent, args);
    let promise;
    try {
      promise = body();
    } catch (error) {
      this._close(seq);
      this._unwind(id, ts, seq, parent, error);
      throw error;
    }
    this._close(seq);
    if (!isPromise(promise)) {
      this._return(id, ts, seq, parent, promise);
      return promise;
    }
    return promiseThen.call(promise, (value) => {
      this._return(id, ts, seq, parent, value);
      return value;
    }, (error) => {
      this._unwind(id, ts, seq, parent, error);
      throw error;
    });
  }

  _close(seq) {
    const stack = this.stack;
    if (this.depth > 0 && stack[this.depth - 1] === seq) {
      this.depth -= 1;
      return;
    }
    for (let at = this.depth - 1; at >= 0; at--) {
      if (stack[at] === seq) {
        this.depth = at;
        return;
      }
    }
  }

  _enter(id, ts, parent, args) {
    let seq = 0;
    try {
      seq = this.out.seq();
      this.stack[this.depth++] = seq;
      const payload = args === undefined || args === null ? '{}' : '{"args":' + this._args(id, args) + '}';
      this.out.emit('[1,' + id + ',' + ts + ',' + this.tid + ',' + seq + ',' + parent + ',' + payload + ']');
    } catch (error) {
      this.out.note('enter', error);
    }
    return seq;
  }

  /** The JSON names of an id's arguments, `["name",` each (computed once per plan). */
  _names(id) {
    let names = this.encoded.get(id);
    if (names === undefined) {
      names = (this.names.get(id) || []).map((name) => '[' + stringify(text(name, 200)) + ',');
      this.encoded.set(id, names);
    }
    return names;
  }

  _args(id, args) {
    const names = this._names(id);
    const count = typeof args.length === 'number' ? args.length : 0;
    const shown = count < MAX_ARGS ? count : MAX_ARGS;
    const r = this.renderer;
    r.event();
    let json = '[';
    for (let i = 0; i < shown; i++) {
      if (i) json += ',';
      if (r.exhausted) {
        json += '["…",' + stringify(CUT) + ']';
        break;
      }
      json += (i < names.length ? names[i] : '["arg' + i + '",') + r.json(args[i]) + ']';
    }
    if (count > shown) json += ',["…","' + (count - shown) + ' more arguments"]';
    return bounded(json + ']', '[["…","not captured: the arguments are over the size limit"]]');
  }

  _value(value) {
    const r = this.renderer;
    r.event();
    return bounded(r.json(value), '"…not captured: the value is over the size limit"');
  }

  _return(id, ts, seq, parent, value) {
    try {
      const now = Number(hrtime());
      this.out.emit('[2,' + id + ',' + now + ',' + this.tid + ',' + this.out.seq() + ',' + parent
        + ',{"return":' + this._value(value) + ',"enter":' + seq + ',"duration":' + (now - ts) + '}]');
    } catch (error) {
      this.out.note('return', error);
    }
  }

  _unwind(id, ts, seq, parent, thrown) {
    try {
      const now = Number(hrtime());
      const { type, message } = describeThrown(thrown, false);
      this.out.emit(new Unwind('[3,' + id + ',' + now + ',' + this.tid + ',' + this.out.seq() + ',' + parent
        + ',{"exception":{"type":' + stringify(type) + ',"message":' + stringify(message) + ',"line":', thrown,
        '},"enter":' + seq + ',"duration":' + (now - ts) + '}]'));
    } catch (error) {
      this.out.note('unwind', error);
    }
  }

  /** An uncaught exception that ends the program (or this worker): event 9, written at once. */
  crash(thrown, origin, thread) {
    try {
      const ts = Number(hrtime());
      const described = describeThrown(thrown, true, true);
      const payload = {
        type: described.type, message: described.message, origin: text(String(origin), 100), thread,
        runtime: 'node', traceback: parseStack(described.stack).reverse(),
      };
      this.out.urgent('[9,0,' + ts + ',' + this.tid + ',' + this.out.seq() + ','
        + (this.depth ? this.stack[this.depth - 1] : 0) + ',' + stringify(payload) + ']');
    } catch (error) {
      this.out.note('crash', error);
    }
    this.out.flush();
  }
}

/**
 * An unwind event whose "line" is read from the exception's stack only when the event is written (the outbox joins
 * its events: join() calls toString()). Formatting an Error's stack replaces V8's structured frames, and Node then
 * prints an unhandled rejection of that error as coming from its own internals instead of the line that created it:
 * read later, the stack is formatted after Node took that location for a crash in the same tick, as Node would.
 */
class Unwind {
  constructor(head, thrown, tail) {
    this.head = head;
    this.thrown = thrown;
    this.tail = tail;
  }

  toString() {
    let line = 'null';
    try {
      const found = describeThrown(this.thrown).line;
      if (found !== null) line = String(found);
    } catch {
      // no line
    }
    this.thrown = undefined;
    return this.head + line + this.tail;
  }
}

function bounded(json, replacement) {
  return json.length > MAX_PAYLOAD ? replacement : json;
}

module.exports = { Recorder };
