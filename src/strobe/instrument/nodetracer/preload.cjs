'use strict';
/**
 * Strobe's preload for traced node processes: `NODE_OPTIONS="--require /abs/preload.cjs"` with
 * `STROBE_NODE_DIR=<dir>` in the environment (child node processes inherit both and are traced too); for Bun,
 * `BUN_OPTIONS="--preload /abs/preload.cjs"` (bun.cjs substitutes sources there).
 *
 * Without STROBE_NODE_DIR it does nothing. With it, in every thread of the program (main and workers):
 * - `<dir>/plan.json` is read (plan.cjs), again when it changes: at every module load and every 50 ms;
 * - sources the plan lists are replaced by their rewritten text when their sha1 still matches: CommonJS through
 *   Module.prototype._compile, ES modules through a load hook (hooks.mjs, `module.register`, its own thread: about
 *   30 ms at startup, so it is registered only once the plan lists a file that may load as an ES module), and for a
 *   require hook that reads the file itself (tsx's, for TypeScript) through fs.readFileSync of exactly that path,
 *   while the module loads and until it compiles (loader hooks registered after this one, such as tsx's, run above
 *   it: they compile the rewritten text); ts-node's JavaScript by its compile of the rewritten TypeScript
 *   (tsnode.cjs);
 * - test runners that read sources themselves (Jest's module registry: fs.readFileSync; Vitest through Vite:
 *   fs.promises.readFile) are given the rewritten text of a listed file, recognised by the caller's package;
 * - functions added while the program runs reach the modules it has loaded already through V8's live edit
 *   (live.cjs), from the event loop;
 * - `globalThis.__strobe` (not enumerable) records the calls of the ids that are on (recorder.cjs); every context
 *   vm.createContext makes (Jest's test environments) gets it too;
 * - events are appended to `<dir>/events-<pid>.jsonl` (outbox.cjs), flushed synchronously at 'exit' and before
 *   each IPC message a child process sends or a worker thread posts (test runners end their workers without 'exit');
 * - an uncaught exception or unhandled rejection that ends the program (or a worker) becomes a crash event.
 * Its own failures are counted and reported in the "errors" of the next batch, never thrown into the program;
 * the program's output, exit code and behaviour are otherwise those it has without the preload.
 */

(function strobePreload() {
  const ours = ['./preload.cjs', './values.cjs', './plan.cjs', './outbox.cjs', './recorder.cjs', './bun.cjs',
    './live.cjs', './tsnode.cjs'];
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
  // Bun: the processes the program starts get the user's BUN_OPTIONS back (with the preload, `bun test` or `bun run`
  // in them would read their subcommand as a script name); they run untraced.
  if (typeof process.env.STROBE_BUN_OPTIONS === 'string') {
    if (process.env.STROBE_BUN_OPTIONS === '') delete process.env.BUN_OPTIONS;
    else process.env.BUN_OPTIONS = process.env.STROBE_BUN_OPTIONS;
    delete process.env.STROBE_BUN_OPTIONS;
  }
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
    const fs = require('fs');
    const Module = require('module');
    const { setInterval: startInterval, setImmediate: soon } = require('timers');
    const { Outbox, sharedCounters } = require('./outbox.cjs');
    const { Recorder } = require('./recorder.cjs');
    const { PlanFile, substitute, rewrittenFor, listsEsModules } = require('./plan.cjs');
    const { bunLoader, flushAfterTests } = require('./bun.cjs');
    const { LiveEditor } = require('./live.cjs');
    const { tsNodeOutput } = require('./tsnode.cjs');

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
    const underBun = bunLoader(note); // Bun: a plugin's onLoad substitutes, for import and require
    if (underBun !== null) flushAfterTests(() => outbox.flush());
    // Functions added while the program runs: modules already loaded get their rewritten code from the event loop
    // (a plan is also adopted while a module loads, with the program's frames on the stack).
    const editor = new LiveEditor({ dir, note, thread: tid });
    let started = false; // the thread's first plan: every module it loads from now on is substituted by it
    let editing = false;
    const edit = () => {
      editing = false;
      try {
        editor.apply(plans.current);
      } catch (error) {
        outbox.note('live edit', error);
      }
    };
    const adopt = (plan) => {
      recorder.setPlan(plan);
      if (!started) {
        started = true;
        editor.begin(plan);
      } else if (!editing && editor.wanted(plan)) {
        editing = true;
        const immediate = soon(edit);
        if (typeof immediate?.unref === 'function') immediate.unref();
      }
      try {
        if (underBun !== null) underBun(plan);
        else if (!hooked && listsEsModules(plan)) registerHooks();
      } catch (error) {
        outbox.note(underBun !== null ? 'bun loader' : 'es module hooks', error);
      }
    };
    const plans = new PlanFile(dir, note, adopt, wt.isMainThread);
    plans.refresh();
    const runtime = Object.freeze({ c: recorder.c, a: recorder.a });
    Object.defineProperty(globalThis, '__strobe', {
      value: runtime, enumerable: false, writable: false, configurable: true,
    });
    // Code run in a context of its own (vm.createContext: Jest's test environments, jsdom's window, Vitest's vm
    // pools) has another global object: the rewritten functions of modules loaded there find `__strobe` on it too.
    // (jest-environment-node copies globalThis's own properties, __strobe included; jsdom's environment does not.)
    const vm = require('vm');
    const createContext = vm.createContext;
    if (typeof createContext === 'function') {
      vm.createContext = function createContext_(...args) {
        const context = Reflect.apply(createContext, this, args);
        try {
          if (Object.getOwnPropertyDescriptor(context, '__strobe') === undefined) {
            Object.defineProperty(context, '__strobe', {
              value: runtime, enumerable: false, writable: false, configurable: true,
            });
          }
        } catch (error) {
          outbox.note('vm context', error);
        }
        return context;
      };
      Object.defineProperty(vm.createContext, 'name', { value: 'createContext' });
    }

    // A loader that reads a module's file itself and compiles what it makes of it (tsx turns TypeScript into
    // JavaScript in its require hook) would compile the original: while Node loads a listed module through require
    // (it is in require.cache, not loaded, not compiled yet), fs.readFileSync of exactly its path by such a loader
    // returns the rewritten text, if the file still has the indexed sha1. The loader's output differs from both
    // texts the plan knows, so that module's compile is not checked again. Node's own read (its .js handler, which
    // hooks such as ts-node's wrap) is left alone: the compile hook substitutes what Node read, as before. The
    // module's own code runs after its compile: its reads get the file as it is.
    const compiled = new WeakSet(); // modules whose _compile has begun
    const served = new WeakSet(); // modules whose loader was given the rewritten text
    const fsRead = fs.readFileSync;
    if (typeof fsRead === 'function' && Module._cache !== null && typeof Module._cache === 'object') {
      fs.readFileSync = function readFileSync(file, options) {
        if (typeof file === 'string') {
          try {
            if (plans.current.files.has(file) && byTestLoader(readFileSync)) { // Jest's module registry
              const text = rewrittenRead(file, options);
              if (text !== null) return text;
            } else {
              const loading = loadingModule(file);
              const text = loading === null || readByNode(readFileSync) ? null : rewrittenRead(file, options);
              if (text !== null) {
                served.add(loading);
                return text;
              }
            }
          } catch (error) {
            outbox.note('commonjs read', error);
          }
        }
        return Reflect.apply(fsRead, this, arguments);
      };
    }
    // Test runners that read a source file themselves and evaluate what they make of it outside Node's module
    // loader: Jest (jest-runtime's module registry, in a vm context, and jest-runner reading a test file: sync
    // reads) and Vitest (Vite's transform pipeline in the vitest process: fs.promises.readFile; the code it makes
    // runs in a fork or thread). Their reads of exactly a listed path get the rewritten text when the file still
    // has the indexed sha1. Their transform caches are keyed by the text they read, so a result cached from the
    // original text is not reused, nor is the traced one reused once tracing stops.
    const fsp = fs.promises;
    const fspRead = fsp !== null && typeof fsp === 'object' ? fsp.readFile : undefined;
    if (typeof fspRead === 'function') {
      fsp.readFile = function readFile(file, options) {
        if (typeof file === 'string') {
          try {
            if (plans.current.files.has(file) && byTestLoader(readFile)) {
              const text = rewrittenRead(file, options);
              if (text !== null) return Promise.resolve(text);
            }
          } catch (error) {
            outbox.note('test runner read', error);
          }
        }
        return Reflect.apply(fspRead, this, arguments);
      };
    }
    /** The module being loaded from `file`, between its entry in require.cache and its compile; else null. */
    const loadingModule = (file) => {
      const cached = Object.prototype.hasOwnProperty.call(Module._cache, file) ? Module._cache[file] : undefined;
      if (!(cached instanceof Module) || cached.loaded !== false || compiled.has(cached)) return null;
      return cached;
    };
    /** Whether the caller of `reader` is Node's own code (node:internal/...), from V8's frames (no stack text is
     * formatted: the program's Error.prepareStackTrace is set aside meanwhile, not called). */
    const readByNode = (reader) => {
      const caller = callerFile(reader);
      return typeof caller === 'string' && caller.startsWith('node:');
    };
    const TEST_LOADERS = /[\\/]node_modules[\\/](?:jest-runtime|jest-runner|vite|vitest)[\\/]/;
    const byTestLoader = (reader) => {
      const caller = callerFile(reader);
      return typeof caller === 'string' && TEST_LOADERS.test(caller);
    };
    /** The file of the function that called `reader`, from V8's frames. */
    const callerFile = (reader) => {
      const { prepareStackTrace, stackTraceLimit } = Error;
      try {
        Error.stackTraceLimit = 1;
        Error.prepareStackTrace = (_, frames) => frames;
        const holder = {};
        Error.captureStackTrace(holder, reader);
        const frames = holder.stack;
        return Array.isArray(frames) && frames.length > 0 ? frames[0].getFileName() : undefined;
      } finally {
        Error.prepareStackTrace = prepareStackTrace;
        Error.stackTraceLimit = stackTraceLimit;
      }
    };
    /** The rewritten text of a listed file as readFileSync(file, options) returns text, or null (read the file). */
    const rewrittenRead = (file, options) => {
      const encoding = typeof options === 'string' ? options
        : options !== null && typeof options === 'object' ? options.encoding : undefined;
      const flag = options !== null && typeof options === 'object' ? options.flag : undefined;
      if ((flag !== undefined && flag !== 'r') || (encoding != null && !Buffer.isEncoding(encoding))) return null;
      const rewritten = rewrittenFor(file, plans.refresh(), note);
      if (rewritten === null) return null;
      const bytes = Buffer.from(rewritten, 'utf8');
      return encoding == null ? bytes : bytes.toString(encoding);
    };

    const compile = Module.prototype._compile;
    if (typeof compile === 'function') {
      Module.prototype._compile = function _compile(content, filename, ...rest) {
        let source = content;
        try {
          compiled.add(this); // the module's own code runs from here: its reads are its own
          if (!served.has(this) && typeof content === 'string' && typeof filename === 'string') {
            const plan = plans.refresh();
            const rewritten = tsNodeOutput(filename, plan, note) ?? substitute(content, filename, plan, note);
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
    // A test runner ends its workers as soon as they have reported their work done, with no 'exit' in them: Vitest
    // kills its forks (SIGTERM) and terminates its threads (Worker.terminate()). So a child process with an IPC
    // channel writes its events before each message it sends, and a worker thread before each message it posts.
    // (Not a SIGTERM listener: with signal-exit's, each would leave ending the process to the other.)
    const send = process.send;
    if (typeof send === 'function') {
      process.send = function send_(...args) {
        try {
          outbox.flush();
        } catch (error) {
          outbox.note('send', error);
        }
        return Reflect.apply(send, this, args);
      };
      Object.defineProperty(process.send, 'name', { value: 'send' });
    }
    const postMessage = wt.MessagePort.prototype.postMessage;
    if (!wt.isMainThread && typeof postMessage === 'function') {
      wt.MessagePort.prototype.postMessage = function postMessage_(...args) {
        try {
          outbox.flush();
        } catch (error) {
          outbox.note('post message', error);
        }
        return Reflect.apply(postMessage, this, args);
      };
      Object.defineProperty(wt.MessagePort.prototype.postMessage, 'name', { value: 'postMessage' });
    }
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
