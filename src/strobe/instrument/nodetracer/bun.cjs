'use strict';
/**
 * Source substitution under Bun, which loads modules with its own transpiler (no Module.prototype._compile on its
 * path, no module.register). Two routes, by what a listed file is:
 * - ES modules and TypeScript (.mjs .ts .mts .tsx .jsx, and a .js with import/export statements or in a
 *   "type": "module" package): a Bun plugin's onLoad gives the rewritten text and Bun compiles it. Its filter
 *   matches exactly the listed paths (an onLoad must return the module's text; one plugin per plan that lists new
 *   files), so every other module loads as Bun loads it.
 * - CommonJS (.cjs, any other .js): Bun compiles what an onLoad returns as an ES module (its module.exports would
 *   be lost), so `require.extensions` (Module._extensions) for .js/.cjs compiles the rewritten text of a listed
 *   file instead. Only require() goes through it: a CommonJS file imported by an ES module runs untraced (noted).
 * - .cts (CommonJS TypeScript) is not substituted.
 *
 *   const adopt = bunLoader(note);   // null when not running under Bun
 *   adopt(plan);                     // on every plan: files listed for the first time get their route
 *
 *   flushAfterTests(() => outbox.flush());   // `bun test`: events written after each test
 *
 * A listed file whose content is no longer the indexed one runs as it is on disk (noted: "file changed since it
 * was indexed"). Like Node's, a module already loaded keeps its code.
 */

const fs = require('fs');
const path = require('path');
const { rewrittenFor, packageType } = require('./plan.cjs');

const LOADERS = new Map([
  ['.ts', 'ts'], ['.mts', 'ts'], ['.cts', 'ts'], ['.tsx', 'tsx'], ['.jsx', 'jsx'],
]);

function escape(text) {
  return text.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&');
}

/** Whether a listed file loads as CommonJS under Bun (the require.extensions route). */
function isCommonJs(file, text, types) {
  const extension = path.extname(file);
  if (extension === '.cjs') return true;
  if (extension !== '.js') return false;
  if (packageType(path.dirname(file), types) === 'module') return false;
  return !ES_SYNTAX.test(text);
}

const ES_SYNTAX = /^[ \t]*(import[\s{*'"]|export[\s{*])/m;

/** The function that gives a plan's new files their route, or null outside Bun. */
function bunLoader(note) {
  const bun = globalThis.Bun;
  if (bun === undefined || bun === null || typeof bun.plugin !== 'function') return null;
  const Module = require('module');
  const covered = new Set();
  const commonJs = new Set();
  const types = new Map();
  let current = null;
  const rewritten = (file) => {
    try {
      const text = current === null ? null : rewrittenFor(file, current, note);
      if (text === null && current !== null && current.files.has(file)) {
        note(`${file}: file changed since it was indexed: running it untraced`);
      }
      return text;
    } catch (error) {
      note(`${file}: ${error && error.message ? error.message : error}: running it untraced`);
      return null;
    }
  };
  const load = (args) => {
    const file = args.path;
    const text = rewritten(file);
    return { contents: text !== null ? text : fs.readFileSync(file, 'utf8'), loader: LOADERS.get(path.extname(file)) || 'js' };
  };
  const hookExtension = (extension) => {
    // Bun lists no .cjs handler but calls one that is set (its .js one compiles CommonJS)
    const original = Module._extensions[extension] || Module._extensions['.js'];
    if (typeof original !== 'function') return;
    Module._extensions[extension] = function strobeBunRequire(module, filename) {
      const text = commonJs.has(filename) ? rewritten(filename) : null;
      if (text !== null && typeof module._compile === 'function') return module._compile(text, filename);
      return Reflect.apply(original, this, arguments);
    };
  };
  let hooked = false;
  return (plan) => {
    current = plan;
    const esm = [];
    for (const file of plan.files.keys()) {
      if (covered.has(file)) continue;
      covered.add(file);
      if (path.extname(file) === '.cts') {
        note(`${file}: CommonJS TypeScript is not traced under Bun: running it untraced`);
        continue;
      }
      let source = '';
      try {
        source = fs.readFileSync(file, 'utf8');
      } catch {
        // unreadable: the plugin route reports it when the file loads
      }
      if (isCommonJs(file, source, types)) commonJs.add(file);
      else esm.push(file);
    }
    if (commonJs.size > 0 && !hooked) {
      hooked = true;
      hookExtension('.js');
      hookExtension('.cjs');
    }
    if (esm.length === 0) return;
    const filter = new RegExp(`^(?:${esm.map(escape).join('|')})$`);
    bun.plugin({ name: 'strobe', setup(build) { build.onLoad({ filter }, load); } });
  };
}

/** Under `bun test` (the preload given as its --preload option), `flush` after each test and after the last:
 * Bun's test runner ends the process without an 'exit' event, so the events of a run would stay in the buffer.
 * Hooks registered by a test preload apply to every test file. Returns whether it is a test run. */
function flushAfterTests(flush) {
  let runner;
  try {
    runner = require('bun:test');
    runner.afterEach(flush); // throws outside the test runner ("Run \"bun test\" to run tests")
  } catch {
    return false;
  }
  runner.afterAll(flush);
  return true;
}

module.exports = { bunLoader, flushAfterTests };
