'use strict';
/**
 * Functions added while the program runs, in modules it has already loaded: their code is replaced in place.
 *
 * The daemon raises the plan's `live` number when it adds functions to a running process. Each thread of the
 * program (main and workers) then, from its event loop (never while a module loads: the program's own frames would
 * be on the stack), opens an in-process inspector session (node:inspector, no port), lists the scripts V8 has
 * (Debugger.enable reports every one), and gives each script of a listed file its rewritten text with
 * Debugger.setScriptSource: V8's live edit, which swaps the code of the changed functions for every closure that
 * exists, keeps the module's state (its top level does not run again), and refuses when a function whose code
 * changes is running (on the stack, or an async function or generator waiting). Only a script whose text is the
 * file as indexed, or a rewritten text of an earlier plan (`earlier`), is replaced: code a loader compiled (tsx's
 * TypeScript, a test runner's transform) or a file changed since it loaded is left as it is, with the reason.
 * The session's Debugger domain is disabled again before the thread goes on.
 *
 * Then the thread writes what it found, atomically, to `<dir>/edits-<pid>-<threadId>.json`:
 *
 *   {"live": 2, "thread": 0, "files": {"/abs/app.js": null, "/abs/app.ts": "the code it runs is not ..."},
 *    "from": {"/abs/app.js": "<sha1 of the text it ran before>"}}
 *
 * null: the script now runs the rewritten text; a string: why it could not; a listed file that this thread has not
 * loaded is absent (it is substituted when it loads). `from` names the text each replaced script ran: V8 gives a
 * function its new code only when its diff of the two texts finds the function again, which the daemon works out
 * from the two texts (symbols/v8_liveedit.py). Under Bun (no inspector session in the process) a file in
 * require.cache is reported as not replaceable.
 *
 *   const editor = new LiveEditor({ dir, note, thread: threadId });
 *   editor.begin(plan)    // the thread's first plan
 *   editor.wanted(plan)   // whether the plan asks for edits this thread has not made
 *   editor.apply(plan)    // make them and write the answer
 */

const fs = require('fs');
const path = require('path');
const { fileURLToPath } = require('url');
const { sha1, readTransformed } = require('./plan.cjs');

const NOT_FILE_TEXT = 'the code it runs is not the text of the file as indexed (a loader compiled it, as tsx does '
  + 'for TypeScript and test runners do with their transforms, or the file changed since it was loaded)';
const BUN = 'a running Bun program keeps the code it loaded (Bun has no in-process inspector to replace it)';
const STATUS = {
  BlockedByActiveFunction: 'a function whose code changes is running now (on the stack of this thread)',
  BlockedByActiveGenerator: 'a function whose code changes is waiting now (a suspended async function or generator)',
  BlockedByTopLevelEsModuleChange: 'V8 refuses a change to the top level of an ES module, which one of its '
    + 'top-level functions it cannot find again in the new text makes (an arrow with an expression body, `x => x * 2`)',
  CompileError: 'V8 did not compile the rewritten text',
};
const STACK_NOTE = '; it can be added again once the function has returned';

class LiveEditor {
  constructor({ dir, note, thread }) {
    this.dir = dir;
    this.note = note;
    this.thread = thread;
    this.done = 0; // the `live` number edits were last made for
    this.session = null;
  }

  /** The thread's first plan: the modules it loads from now on are substituted by it (answered with no files). */
  begin(plan) {
    this.done = plan.live;
    if (plan.live > 0) this._answer(plan.live, {}, {});
  }

  wanted(plan) {
    return plan.live > this.done;
  }

  apply(plan) {
    if (!this.wanted(plan)) return;
    this.done = plan.live;
    let answer;
    try {
      answer = globalThis.Bun !== undefined ? { files: this._underBun(plan), from: {} } : this._edit(plan);
    } catch (error) {
      answer = { files: {}, from: {} };
      const reason = `the inspector could not be used (${errorMessage(error)})`;
      for (const file of plan.files.keys()) answer.files[file] = reason;
      this.note(`live edit: ${reason}`);
    }
    this._answer(plan.live, answer.files, answer.from);
  }

  _underBun(plan) {
    const files = {};
    const cache = require('module')._cache ?? {};
    for (const file of plan.files.keys()) {
      if (Object.prototype.hasOwnProperty.call(cache, file)) files[file] = BUN;
    }
    return files;
  }

  _edit(plan) {
    this.session ??= this._connect();
    const session = this.session;
    const scripts = new Map(); // listed file -> its script ids
    const listen = (message) => {
      const file = fileOf(message.params.url);
      if (file !== null && plan.files.has(file)) {
        if (!scripts.has(file)) scripts.set(file, []);
        scripts.get(file).push(message.params.scriptId);
      }
    };
    session.on('Debugger.scriptParsed', listen);
    try {
      post(session, 'Debugger.enable'); // reports every script V8 has, before it returns
    } finally {
      session.off('Debugger.scriptParsed', listen);
    }
    const files = {};
    const from = {};
    try {
      for (const [file, ids] of scripts) {
        const entry = plan.files.get(file);
        const rewritten = readTransformed(entry, file, this.note);
        if (rewritten === null) {
          files[file] = 'its rewritten text cannot be read';
          continue;
        }
        let reason = null;
        for (const scriptId of ids) {
          const why = this._replace(session, scriptId, entry, rewritten, file, from);
          if (why !== null) reason = why;
        }
        files[file] = reason;
      }
    } finally {
      post(session, 'Debugger.disable');
    }
    return { files, from };
  }

  /** Give one script the rewritten text; null when it runs it now (`from[file]`: the sha1 of the text it ran),
   * else why not. */
  _replace(session, scriptId, entry, rewritten, file, from) {
    const { scriptSource } = post(session, 'Debugger.getScriptSource', { scriptId });
    if (scriptSource === rewritten) return null;
    const digest = sha1(scriptSource);
    if (digest !== entry.sha1 && !entry.earlier.has(digest)) return NOT_FILE_TEXT;
    const result = post(session, 'Debugger.setScriptSource', { scriptId, scriptSource: rewritten });
    if ((result.status === undefined || result.status === 'Ok') && result.exceptionDetails === undefined) {
      from[file] = digest;
      return null;
    }
    if (result.status === undefined || result.status === 'Ok') return STATUS.CompileError;
    const reason = STATUS[result.status] ?? `V8 refused the change (${result.status})`;
    return result.status.startsWith('BlockedByActive') ? reason + STACK_NOTE : reason;
  }

  _connect() {
    const { Session } = require('inspector');
    const session = new Session();
    session.connect();
    return session;
  }

  _answer(live, files, from) {
    const name = `edits-${process.pid}-${this.thread}.json`;
    const temporary = path.join(this.dir, `.${name}.tmp`);
    try {
      fs.writeFileSync(temporary, JSON.stringify({ live, thread: this.thread, files, from }), { mode: 0o600 });
      fs.renameSync(temporary, path.join(this.dir, name));
    } catch (error) {
      this.note(`live edit: the answer cannot be written (${errorMessage(error)})`);
    }
  }
}

/** The file a script's URL names (file: URLs, or a plain absolute path as vm scripts have), else null. */
function fileOf(url) {
  if (typeof url !== 'string' || url === '') return null;
  if (url.startsWith('file:')) {
    try {
      return fileURLToPath(url);
    } catch {
      return null;
    }
  }
  return path.isAbsolute(url) ? url : null;
}

/** A command on an in-process session: its callback runs before post returns. */
function post(session, method, params) {
  let failure = null;
  let answer = null;
  session.post(method, params, (error, result) => {
    failure = error;
    answer = result;
  });
  if (failure) throw failure;
  if (answer === null) throw new Error(`${method} did not answer at once`);
  return answer;
}

function errorMessage(error) {
  const message = error !== null && typeof error === 'object' ? error.message : undefined;
  return typeof message === 'string' ? message : String(error);
}

module.exports = { LiveEditor, fileOf };
