'use strict';
/**
 * The daemon's plan for a traced node process, and the source substitution it drives.
 *
 * `<STROBE_NODE_DIR>/plan.json` (the daemon replaces it atomically: write a temporary file, then rename):
 *
 *   {"v": 1, "depth": 3, "on": [7, 9], "names": {"7": ["a", "b"], "9": null},
 *    "files": {"/abs/app.js": {"sha1": "<hex sha1 of the UTF-8 source>", "transformed": "/abs/out/app.js"}},
 *    "max_buffered": 200000, "flush_at": 1000, "live": 2}
 *
 * `on`: the ids whose calls are recorded; `names`: an id's parameter names (null: arg0, arg1...); `depth`: levels
 * of containers rendered (0-10, default 3); `files`: the sources to replace by their rewritten text when their
 * content still has the indexed sha1 (a file's optional `"earlier": [sha1...]`: its rewritten texts of earlier
 * plans, which a module loaded then runs); `max_buffered`/`flush_at` (optional): the outbox's bounds; `live`
 * (optional, default 0): raised by the daemon when functions were added while the program runs, so that modules
 * already loaded get their rewritten code too (live.cjs).
 *
 *   const plans = new PlanFile(dir, note, (plan) => tracer.setPlan(plan));
 *   plans.refresh();                               // a stat; reads and parses only when the file changed
 *   substitute(content, '/abs/app.js', plans.current, note)   // the text to compile
 *   rewrittenFor('/abs/app.ts', plans.current, note)          // the text a loader reading the file is given
 *
 * A plan that is not valid (not JSON, not v1, over 64 MiB) is ignored with an error noted: the previous one stays.
 * A missing plan means nothing is traced or substituted. Used on the program's threads and the ESM hooks thread.
 */

const fs = require('fs');
const path = require('path');
let crypto = null; // loaded when a listed file is first checked

const PLAN_FILE = 'plan.json';
const MAX_PLAN_BYTES = 64 << 20;
const MAX_SOURCE_BYTES = 64 << 20;
const DEFAULT_DEPTH = 3;
const DEFAULT_MAX_BUFFERED = 200_000;
const DEFAULT_FLUSH_AT = 1000;
const SHA1 = /^[0-9a-f]{40}$/;

const EMPTY = Object.freeze({
  depth: DEFAULT_DEPTH, on: new Set(), names: new Map(), files: new Map(),
  maxBuffered: DEFAULT_MAX_BUFFERED, flushAt: DEFAULT_FLUSH_AT, live: 0,
});

function isObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function short(value) {
  const s = String(value);
  return s.length > 80 ? s.slice(0, 80) + '…' : s;
}

function boundedInt(raw, key, low, high, fallback, problems) {
  const value = raw[key];
  if (value === undefined) return fallback;
  if (Number.isInteger(value) && value >= low && value <= high) return value;
  problems.push(`"${key}" must be an integer from ${low} to ${high}, not ${short(JSON.stringify(value))}`);
  return fallback;
}

/** A parsed plan (frozen, shaped like EMPTY) and the problems found in it; throws when it cannot be used at all. */
function parsePlan(textValue) {
  const raw = JSON.parse(textValue);
  if (!isObject(raw)) throw new Error('not a JSON object');
  if (raw.v !== 1) throw new Error(`version ${short(JSON.stringify(raw.v))} is not supported (this preload reads v 1)`);
  const problems = [];
  const depth = boundedInt(raw, 'depth', 0, 10, DEFAULT_DEPTH, problems);
  const maxBuffered = boundedInt(raw, 'max_buffered', 1, 10_000_000, DEFAULT_MAX_BUFFERED, problems);
  const flushAt = boundedInt(raw, 'flush_at', 1, 100_000, DEFAULT_FLUSH_AT, problems);
  const live = boundedInt(raw, 'live', 0, Number.MAX_SAFE_INTEGER, 0, problems);
  const on = new Set();
  if (Array.isArray(raw.on)) {
    for (const id of raw.on) {
      if (Number.isSafeInteger(id)) on.add(id);
      else problems.push(`"on": ${short(JSON.stringify(id))} is not an integer id`);
    }
  } else if (raw.on !== undefined) {
    problems.push('"on" must be a list of integer ids');
  }
  const names = new Map();
  if (isObject(raw.names)) {
    for (const [key, list] of Object.entries(raw.names)) {
      const id = Number(key);
      if (!Number.isSafeInteger(id) || String(id) !== key) {
        problems.push(`"names": key ${short(JSON.stringify(key))} is not an integer id`);
      } else if (list === null) {
        names.set(id, null);
      } else if (Array.isArray(list) && list.every((name) => typeof name === 'string')) {
        names.set(id, list.slice(0, 64).map((name) => (name.length > 200 ? name.slice(0, 200) + '…' : name)));
      } else {
        problems.push(`"names"."${key}" must be a list of strings or null`);
      }
    }
  } else if (raw.names !== undefined) {
    problems.push('"names" must be an object {"id": [names] | null}');
  }
  const files = new Map();
  if (isObject(raw.files)) {
    for (const [file, entry] of Object.entries(raw.files)) {
      const sha1 = isObject(entry) && typeof entry.sha1 === 'string' ? entry.sha1.toLowerCase() : '';
      if (!path.isAbsolute(file) || !SHA1.test(sha1) || typeof entry.transformed !== 'string'
          || !path.isAbsolute(entry.transformed)) {
        problems.push(`"files"."${short(file)}" needs an absolute path, "sha1" (40 hex digits) and an absolute "transformed"`);
        continue;
      }
      const earlier = Array.isArray(entry.earlier)
        ? entry.earlier.filter((digest) => typeof digest === 'string' && SHA1.test(digest)) : [];
      files.set(file, Object.freeze({ sha1, transformed: entry.transformed, earlier: new Set(earlier) }));
    }
  } else if (raw.files !== undefined) {
    problems.push('"files" must be an object {"/abs/path": {"sha1", "transformed"}}');
  }
  return { plan: Object.freeze({ depth, on, names, files, maxBuffered, flushAt, live }), problems };
}

/** Hex sha1 of a string (as UTF-8) or of bytes. */
function sha1(data) {
  crypto ??= require('crypto');
  return crypto.createHash('sha1').update(data).digest('hex');
}

/** The file's whole text, when it holds at most `limit` bytes (the file is read through one descriptor). */
function readBounded(file, limit) {
  const fd = fs.openSync(file, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    if (size > limit) throw new Error(`${file} holds ${size} bytes, over the limit of ${limit}`);
    const buffer = Buffer.allocUnsafe(size + 1);
    let got = 0;
    for (let n = 1; n > 0 && got < buffer.length; got += n) n = fs.readSync(fd, buffer, got, buffer.length - got, null);
    if (got > size) throw new Error(`${file} grew while it was read`);
    return buffer.subarray(0, got);
  } finally {
    fs.closeSync(fd);
  }
}

function errorMessage(error) {
  const message = error !== null && typeof error === 'object' ? error.message : undefined;
  return typeof message === 'string' ? message : String(error);
}

/** plan.json in `dir`, re-read when its inode, size, mtime or ctime change. `note(text)` takes the plan's problems
 * (`report` false: kept quiet, for threads other than the main one, which reports them); `changed(plan)` is called
 * with each newly adopted plan. */
class PlanFile {
  constructor(dir, note, changed = () => {}, report = true) {
    this.file = path.join(dir, PLAN_FILE);
    this.note = report ? note : () => {};
    this.changed = changed;
    this.key = null;
    this.current = EMPTY;
  }

  refresh() {
    let stat;
    try {
      stat = fs.statSync(this.file, { bigint: true, throwIfNoEntry: false });
    } catch (error) {
      const key = 'failed: ' + errorMessage(error);
      if (this.key !== key) {
        this.key = key;
        this.note(`plan: ${this.file} cannot be read: ${errorMessage(error)} (the previous plan stays)`);
      }
      return this.current;
    }
    try {
      if (stat === undefined) {
        if (this.key !== 'missing') {
          this.key = 'missing';
          this.note(`plan: ${this.file} not found: nothing is traced until it exists`);
          this._adopt(EMPTY);
        }
        return this.current;
      }
      const key = `${stat.ino}:${stat.size}:${stat.mtimeNs}:${stat.ctimeNs}`;
      if (key === this.key) return this.current;
      this.key = key;
      if (stat.size > MAX_PLAN_BYTES) {
        this.note(`plan: ${this.file} holds ${stat.size} bytes, over 64 MiB: ignored`);
        return this.current;
      }
      const { plan, problems } = parsePlan(readBounded(this.file, MAX_PLAN_BYTES).toString('utf8'));
      if (problems.length) {
        const more = problems.length > 5 ? ` (and ${problems.length - 5} more)` : '';
        this.note('plan: ' + problems.slice(0, 5).join('; ') + more);
      }
      this._adopt(plan);
    } catch (error) {
      this.note(`plan: ${this.file} ignored: ${errorMessage(error)}`);
    }
    return this.current;
  }

  _adopt(plan) {
    this.current = plan;
    this.changed(plan);
  }
}

function readTransformed(entry, file, note) {
  try {
    return readBounded(entry.transformed, MAX_SOURCE_BYTES).toString('utf8');
  } catch (error) {
    note(`${file}: its rewritten source cannot be read (${errorMessage(error)}): running it untraced`);
    return null;
  }
}

/**
 * The text to compile for `file` whose loaded source is `source` (a string, or bytes: Buffer, typed array,
 * ArrayBuffer): its rewritten text when the plan lists it with the source's sha1, else null (compile the source
 * as it is). A listed file whose sha1 differs is noted "file changed since it was indexed", unless the source is
 * already the rewritten text (loaded through the ESM hook first).
 */
function substitute(source, file, plan, note) {
  const entry = plan.files.get(file);
  if (entry === undefined) return null;
  const data = typeof source === 'string' ? source
    : source instanceof ArrayBuffer ? new Uint8Array(source)
    : ArrayBuffer.isView(source) ? new Uint8Array(source.buffer, source.byteOffset, source.byteLength)
    : null;
  if (data === null) {
    note(`${file}: a loaded source of type ${typeof source} cannot be checked: running it untraced`);
    return null;
  }
  const digest = sha1(data);
  if (digest === entry.sha1) return readTransformed(entry, file, note);
  try {
    const rewritten = readBounded(entry.transformed, MAX_SOURCE_BYTES);
    if (sha1(rewritten) === digest) return null;
  } catch {
    // reported below as a changed file
  }
  if (diskSha1(file) === entry.sha1) {
    note(`${file}: runs untraced: a loader transformed its source before Node compiled it (Strobe traces through `
      + "tsx, ts-node's CommonJS hook, test runners, or compiled JavaScript with source maps)");
  } else {
    note(`${file}: file changed since it was indexed (sha1 ${digest}, indexed ${entry.sha1}): running it untraced`);
  }
  return null;
}

/** The sha1 of a file's content as the daemon indexed it (UTF-8, a byte order mark left out); null when unreadable. */
function diskSha1(file) {
  try {
    const data = readBounded(file, MAX_SOURCE_BYTES);
    const bom = data.length >= 3 && data[0] === 0xef && data[1] === 0xbb && data[2] === 0xbf;
    return sha1(bom ? data.subarray(3) : data);
  } catch {
    return null;
  }
}

/**
 * The rewritten text of `file` when the plan lists it and the file on disk still has the indexed sha1, else null:
 * what a loader that reads the file itself (tsx's require hook) is given to compile in its place.
 */
function rewrittenFor(file, plan, note) {
  const entry = plan.files.get(file);
  if (entry === undefined || diskSha1(file) !== entry.sha1) return null;
  return readTransformed(entry, file, note);
}

/** The "type" of the package.json nearest to `dir` ("module", "commonjs" or undefined), memoised in `types`. */
function packageType(dir, types) {
  if (types.has(dir)) return types.get(dir);
  let type;
  const manifest = path.join(dir, 'package.json');
  try {
    const raw = JSON.parse(readBounded(manifest, 1 << 20).toString('utf8'));
    type = isObject(raw) && typeof raw.type === 'string' ? raw.type : undefined;
  } catch {
    const parent = path.dirname(dir);
    type = fs.existsSync(manifest) || parent === dir ? undefined : packageType(parent, types);
  }
  types.set(dir, type);
  return type;
}

/** Whether a file the plan lists may be loaded as an ES module (so the load hook is needed): an .mjs, a .js in a
 * "type": "module" package (or anywhere, when node detects the format), or an extension node has no rule for. */
function listsEsModules(plan) {
  const options = `${process.execArgv.join(' ')} ${process.env.NODE_OPTIONS || ''}`;
  const detect = options.includes('--experimental-detect-module') && !options.includes('--no-experimental-detect');
  const types = new Map();
  for (const file of plan.files.keys()) {
    const extension = path.extname(file);
    if (extension === '.cjs' || extension === '.json' || extension === '.node') continue;
    if (extension !== '.js' || detect || packageType(path.dirname(file), types) === 'module') return true;
  }
  return false;
}

module.exports = {
  PlanFile, parsePlan, substitute, rewrittenFor, readTransformed, listsEsModules, packageType, sha1, EMPTY, PLAN_FILE,
  MAX_PLAN_BYTES,
};
