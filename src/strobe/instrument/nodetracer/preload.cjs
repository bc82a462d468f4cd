'use strict';
/**
 * Strobe's preload for traced node processes: `NODE_OPTIONS="--require /abs/preload.cjs"` with
 * `STROBE_NODE_DIR=<dir>` in the environment (child node processes inherit both and are traced too).
 *
 * Without STROBE_NODE_DIR it does nothing. With it, in every thread of the program (main and workers):
 * - `<dir>/plan.json` is read (plan.cjs), again when it changes: at every module load and every 50 ms;
 * - sources the plan lists are replaced by their rewritten text when their sha1 still matches: CommonJS through
 *   Module.prototype._compile, ES modules through a load hook (hooks.mjs, `module.register`, its own thread: about
 *   30 ms at startup, so it is registered only once the plan lists a file that may load as an ES module);
 * - `globalThis.__strobe` (not enumerable) records the calls of the ids that are on (recorder.cjs);
 * - events are appended to `<dir>/events-<pid>.jsonl` (outbox.cjs), flushed synchronously at 'exit';
 * - an uncaught exception or unhandled rejection that ends the program (or a worker) becomes a crash event.
 * Its own failures are counted and reported in the "errors" of the next batch, never thrown into the program;
 * the program's output, exit code and behaviour are otherwise those it has without the preload.
 */

(function strobePreload() {
  const ours = ['./preload.cjs', './values.cjs', './plan.cjs', './outbox.cjs', './recorder.cjs'];
  const forget = () => {
    for (const name of ours) {
      try {
        delete require.cache[require.resolve(name)];
      } catch {
        // not loaded
      }
    }
  };
  if (!process.env.STROBE_NODE_DIR) {
    forget();
    return;
  }
  const dir = require('path').resolve(process.env.STROBE_NODE_DIR); // the program may change directory
  const HOOKS_THREAD = 'strobe:esm-hooks-thread';
  const COUNTERS = 'strobe:counters';
  const wt = require('worker_threads');
  // The ESM hooks thread runs preloads too: the hooks themselves (hooks.mjs) do the work there.
  if (!wt.isMainThread && wt.getEnvironmentData(HOOKS_THREAD) === true) return forget();
  if (Object.getOwnPropertyDescriptor(globalThis, '__strobe') !== undefined) return forget(); // preloaded twice

  let outbox = null;
  try {
    const path = require('path');
    const { pathToFileURL } = require('url');
    const Module = require('module');
    const { setInterval: startInterval } = require('timers');
    const { Outbox, sharedCounters } = require('./outbox.cjs');
    const { Recorder } = require('./recorder.cjs');
    const { PlanFile, substitute, listsEsModules } = require('./plan.cjs');

    const problems = [];
    let shared = wt.getEnvironmentData(COUNTERS);
    if (!(shared instanceof SharedArrayBuffer)) {
      if (!wt.isMainThread) problems.push('this worker does not share the process\'s counters: its seqs may repeat');
      shared = new SharedArrayBuffer(16);
      wt.setEnvironmentData(COUNTERS, shared); // cloned into every worker created from now on (shared memory)
    }
    const tid = wt.threadId;
    const thread = wt.isMainThread ? 'main' : `worker ${tid}`;
    outbox = new Outbox({ dir, counters: sharedCounters(shared), thread: [tid, thread] });
    const note = (message) => outbox.note('', message);
    for (const problem of problems) note(problem);
    const recorder = new Recorder(outbox, tid);
    let hooked = false; // the ESM load hook is registered (once the plan lists a file that may be an ES module)
    const registerHooks = () => {
      hooked = true;
      if (typeof Module.register !== 'function') {
        note(`ES modules cannot be substituted: module.register is missing (Node ${process.version}): CommonJS only`);
        return;
      }
      wt.setEnvironmentData(HOOKS_THREAD, true); // seen by the hooks thread register() starts, not by later workers
      try {
        Module.register(pathToFileURL(path.join(__dirname, 'hooks.mjs')).href, { data: { dir, counters: shared } });
      } finally {
        wt.setEnvironmentData(HOOKS_THREAD, undefined);
      }
    };
    const adopt = (plan) => {
      recorder.setPlan(plan);
      try {
        if (!hooked && listsEsModules(plan)) registerHooks();
      } catch (error) {
        outbox.note('es module hooks', error);
      }
    };
    const plans = new PlanFile(dir, note, adopt, wt.isMainThread);
    plans.refresh();
    Object.defineProperty(globalThis, '__strobe', {
      value: Object.freeze({ c: recorder.c, a: recorder.a }), enumerable: false, writable: false, configurable: true,
    });

    const compile = Module.prototype._compile;
    if (typeof compile === 'function') {
      Module.prototype._compile = function _compile(content, filename, ...rest) {
        let source = content;
        try {
          if (typeof content === 'string' && typeof filename === 'string') {
            const rewritten = substitute(content, filename, plans.refresh(), note);
            if (rewritten !== null) source = rewritten;
          }
        } catch (error) {
          outbox.note('commonjs load', error);
        }
        return compile.call(this, source, filename, ...rest);
      };
    } else {
      note('CommonJS sources cannot be substituted: Module.prototype._compile is missing');
    }

    process.on('exit', () => outbox.exit(!wt.isMainThread));
    process.on('uncaughtExceptionMonitor', (error, origin) => {
      try {
        if (process.listenerCount('uncaughtException') > 0 || process.hasUncaughtExceptionCaptureCallback()) return;
        recorder.crash(error, origin, thread);
      } catch (failure) {
        outbox.note('crash', failure);
      }
    });
    startInterval(() => {
      try {
        plans.refresh();
      } catch (error) {
        outbox.note('plan timer', error);
      }
    }, 50).unref();
  } catch (error) {
    try {
      if (outbox !== null) outbox.note('install', error);
    } catch {
      // nothing left to report it with
    }
  }
  forget();
})();
