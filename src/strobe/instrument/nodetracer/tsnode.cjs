'use strict';
/**
 * ts-node (its CommonJS require hook: `ts-node app.ts`, `node -r ts-node/register app.ts`) compiles a TypeScript
 * file from what Node's own .js loader read of it, checking its types, and passes the JavaScript it makes to
 * Module.prototype._compile: a text the plan does not know. For a file the plan lists, still as it was indexed,
 * that JavaScript is replaced by the same compile of the rewritten TypeScript (the compiler ts-node loaded, with
 * the options of its project), emitted only: the types were checked on the program's own text, as without Strobe,
 * so the wrapper is never reported as a type error.
 *
 * ts-node maps stack traces through @cspotcode/source-map-support, with the map of its own compile: on the rewritten
 * JavaScript its lines would be off. So the map of this compile (to the rewritten TypeScript: the same lines as the
 * file) is put first in that library's shared list of map handlers (its documented `retrieveSourceMap` hook, kept on
 * globalThis for every copy of it), for the substituted files only; the frames of the program's own report, of
 * crash events and of exceptions leaving traced functions then point at the .ts lines. Its stack formatter, set up by
 * ts-node before the first TypeScript file compiles, is trusted to be read by the recorder (values.cjs).
 *
 *   const js = tsNodeOutput('/p/app.ts', plan, note);   // null: not ts-node's, or not listed
 */

const { rewrittenFor } = require('./plan.cjs');
const { trustStackFormatter } = require('./values.cjs');

const REGISTERED = Symbol.for('ts-node.register.instance'); // where ts-node's register() keeps its service
const TYPESCRIPT = /\.(?:[cm]?ts|tsx)$/;
const SHARED_MAPS = Symbol.for('source-map-support/sharedData'); // @cspotcode/source-map-support's shared state
const MAP_COMMENT = /\n\/\/# sourceMappingURL=[^\n]*\s*$/;
const maps = new Map(); // substituted file -> the source map of its compile (JSON text)
let mapping = false;

/** Stack frames in `filename` are mapped with `map` by ts-node's source-map-support. */
function useMap(filename, map) {
  maps.set(filename, map);
  if (mapping) return;
  const shared = globalThis[SHARED_MAPS];
  if (shared === null || typeof shared !== 'object' || !Array.isArray(shared.retrieveMapHandlers)) return;
  shared.retrieveMapHandlers.unshift((source) => {
    const found = maps.get(source);
    return found === undefined ? null : { url: source, map: found };
  });
  mapping = true;
  if (typeof Error.prepareStackTrace === 'function') trustStackFormatter(Error.prepareStackTrace);
}

/** The registered ts-node service that compiles `filename`, or null. */
function serviceFor(filename) {
  const service = process[REGISTERED];
  if (service === null || typeof service !== 'object') return null;
  const ts = service.ts;
  const options = service.config !== null && typeof service.config === 'object' ? service.config.options : undefined;
  if (ts === null || typeof ts !== 'object' || typeof ts.transpileModule !== 'function') return null;
  if (options === null || typeof options !== 'object') return null;
  if (typeof service.enabled === 'function' && !service.enabled()) return null;
  if (typeof service.ignored === 'function' && service.ignored(filename)) return null;
  return { ts, options };
}

/** The JavaScript of the rewritten `filename` as ts-node would emit it, or null when ts-node does not compile it or
 * the plan has no rewrite of its current text. */
function tsNodeOutput(filename, plan, note) {
  if (!TYPESCRIPT.test(filename)) return null;
  const service = serviceFor(filename);
  if (service === null) return null;
  const rewritten = rewrittenFor(filename, plan, note);
  if (rewritten === null) return null;
  const compilerOptions = {
    ...service.options, declaration: false, declarationMap: false, noEmit: false, sourceMap: true,
    inlineSourceMap: false, inlineSources: false, sourceRoot: undefined, mapRoot: undefined,
  };
  const { outputText, sourceMapText } = service.ts.transpileModule(rewritten, { fileName: filename, compilerOptions,
    reportDiagnostics: false });
  if (typeof outputText !== 'string') return null;
  if (typeof sourceMapText === 'string') useMap(filename, sourceMapText);
  return outputText.replace(MAP_COMMENT, '\n'); // the map is given to source-map-support, not named by a file
}

module.exports = { tsNodeOutput };
