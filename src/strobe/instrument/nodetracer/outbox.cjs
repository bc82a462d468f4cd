'use strict';
/**
 * The preload's outgoing side: events buffered per thread, written as batches to `<dir>/events-<pid>.jsonl`.
 *
 * Every line is one batch, the format of the Python tracer (src/strobe/daemon/runtimes/cpython_ingest.py reads it):
 *
 *   {"v":1,"n":2,"pid":4242,"threads":[[0,"main"]],"events":[[1,7,ts,0,1,0,{...}],[2,7,ts,0,2,0,{...}]],
 *    "dropped":0,"errors":["plan: ...","a.js: file changed since it was indexed ... (×2)"]}
 *
 * "v" and "n" come first (the daemon reads the count with `^\{"v":1,"n":(\d+),`); "threads" names the writing
 * thread in its first batch with events; "dropped" is the process's total of events refused so far (all threads
 * share the count); "errors" (only when there are some) lists the preload's own failures since the last batch,
 * each once with its count. At most BATCH_EVENTS events and about 1 MiB per line.
 *
 *   const out = new Outbox({dir, counters: sharedCounters(), thread: [0, 'main']});
 *   out.emit('[1,7,...]');   // an event already JSON: buffered; written after 10 ms, at `flushAt` events, or at exit
 *   out.note('plan', error);  // a failure of the preload itself ("plan: TypeError: ..."), in the next batch
 *
 * Every thread of a process (and the ESM hooks thread, `timers: false`: it writes at once) appends to the same file
 * with its own descriptor opened 'a' (O_APPEND, 0600): each batch is one write, so lines do not interleave.
 * A failed write keeps the events (up to `cap`) and retries after 100 ms.
 */

const { openSync, writeSync, closeSync } = require('fs');
const path = require('path');
const { setTimeout: startTimer } = require('timers');
const { text, describeThrown } = require('./values.cjs');

const BATCH_EVENTS = 1000;
const BATCH_CHARS = 1 << 20; // and about this much text per line (at least one event)
const FLUSH_MS = 10;
const RETRY_NS = 100_000_000;
const MAX_ERRORS = 50;
const SEQ = 0;
const DROPPED = 1;
const hrtime = process.hrtime.bigint;
const byteLength = Buffer.byteLength;

/** The counters shared by every thread of the process: [next seq - 1, events dropped], as BigInt64. */
function sharedCounters(buffer = new SharedArrayBuffer(16)) {
  return new BigInt64Array(buffer, 0, 2);
}

function errorText(error) {
  if (typeof error === 'string') return error;
  try {
    const d = describeThrown(error, false);
    return d.message ? d.type + ': ' + d.message : d.type;
  } catch {
    return 'unknown error';
  }
}

/** How many of the first events make one line: at most BATCH_EVENTS, about BATCH_CHARS of text, at least one. */
function batchCount(events) {
  const limit = Math.min(events.length, BATCH_EVENTS);
  let chars = 0;
  for (let i = 0; i < limit; i++) {
    const event = events[i];
    chars += typeof event === 'string' ? event.length : 200; // an unwind whose line is read when it is written
    if (chars > BATCH_CHARS && i > 0) return i;
  }
  return limit;
}

class Outbox {
  constructor({ dir, counters, thread = null, timers = true }) {
    this.file = path.join(dir, `events-${process.pid}.jsonl`);
    this.pid = process.pid;
    this.counters = counters;
    this.thread = thread; // [tid, name] until the first batch with events names it
    this.timers = timers;
    this.cap = 200_000;
    this.flushAt = BATCH_EVENTS;
    this.events = [];
    this.errors = new Map(); // message -> count
    this.moreErrors = 0;
    this.sentDropped = 0;
    this.fd = -1;
    this.retryAt = 0n;
    this.timer = null;
    this.flushing = false;
    this.exiting = false;
    this.onTimer = () => {
      this.timer = null;
      this.flush();
    };
  }

  limits(cap, flushAt) {
    this.cap = cap;
    this.flushAt = flushAt;
  }

  /** The next sequence number of the process (1, 2, ...). */
  seq() {
    return Number(Atomics.add(this.counters, SEQ, 1n)) + 1;
  }

  dropped() {
    return Number(Atomics.load(this.counters, DROPPED));
  }

  emit(event) {
    const events = this.events;
    if (events.length >= this.cap) {
      Atomics.add(this.counters, DROPPED, 1n);
      if (this.timer === null) this._arm();
      return;
    }
    events.push(event);
    if (events.length >= this.flushAt || this.exiting) this.flush();
    else if (this.timer === null) this._arm();
  }

  /** An event that is never dropped (a crash). */
  urgent(event) {
    this.events.push(event);
  }

  /** A failure of the preload: counted, reported in the next batch, never thrown into the program. */
  note(where, error) {
    try {
      this._record(text((where ? where + ': ' : '') + errorText(error), 300));
      if (!this.timers || this.exiting) this.flush();
      else if (this.timer === null) this._arm();
    } catch {
      // nothing left to report it with
    }
  }

  _record(message) {
    const count = this.errors.get(message);
    if (count !== undefined) this.errors.set(message, count + 1);
    else if (this.errors.size < MAX_ERRORS) this.errors.set(message, 1);
    else this.moreErrors += 1;
  }

  _arm() {
    if (!this.timers || this.timer !== null) return;
    try {
      this.timer = startTimer(this.onTimer, FLUSH_MS);
      this.timer.unref();
    } catch {
      this.timer = null;
    }
  }

  _errorList() {
    if (this.errors.size === 0 && this.moreErrors === 0) return null;
    const list = [];
    for (const [message, count] of this.errors) list.push(count > 1 ? `${message} (×${count})` : message);
    if (this.moreErrors) list.push(`… ${this.moreErrors} more errors of other kinds`);
    return list;
  }

  /** Write everything buffered now (synchronously), in lines of at most BATCH_EVENTS events. */
  flush() {
    if (this.flushing) return;
    this.flushing = true;
    try {
      for (;;) {
        const events = this.events;
        const count = batchCount(events);
        const dropped = this.dropped();
        const errors = this._errorList();
        if (count === 0 && errors === null && dropped === this.sentDropped) break;
        let line = '{"v":1,"n":' + count + ',"pid":' + this.pid;
        if (count && this.thread !== null) line += ',"threads":' + JSON.stringify([this.thread]);
        line += ',"events":[' + (count === events.length ? events : events.slice(0, count)).join(',');
        line += '],"dropped":' + dropped + (errors === null ? '' : ',"errors":' + JSON.stringify(errors)) + '}\n';
        if (!this._write(line)) {
          this._arm();
          break;
        }
        if (count === events.length) this.events = [];
        else events.splice(0, count);
        if (errors !== null) {
          this.errors.clear();
          this.moreErrors = 0;
        }
        if (count) this.thread = null;
        this.sentDropped = dropped;
        if (this.events.length === 0) break;
      }
    } catch (error) {
      this._record(text('flush: ' + errorText(error), 300));
    } finally {
      this.flushing = false;
    }
  }

  _write(line) {
    try {
      if (this.fd < 0) {
        if (!this.exiting && hrtime() < this.retryAt) return false;
        this.fd = openSync(this.file, 'a', 0o600);
      }
      const written = writeSync(this.fd, line);
      const size = byteLength(line);
      if (written < size) { // a short write (a full disk, a signal): the rest, as bytes
        const data = Buffer.from(line, 'utf8');
        for (let at = written; at < size;) at += writeSync(this.fd, data, at, size - at);
      }
      return true;
    } catch (error) {
      this.retryAt = hrtime() + BigInt(RETRY_NS);
      this.close();
      this._record(text(`events file ${this.file}: ${errorText(error)}`, 300));
      return false;
    }
  }

  close() {
    if (this.fd >= 0) {
      try {
        closeSync(this.fd);
      } catch {
        // already closed
      }
      this.fd = -1;
    }
  }

  /** At exit: write what is buffered; later events are written as they come. */
  exit(closeAfter) {
    this.exiting = true;
    this.flush();
    if (closeAfter) this.close();
  }
}

module.exports = { Outbox, sharedCounters, errorText, BATCH_EVENTS, FLUSH_MS };
