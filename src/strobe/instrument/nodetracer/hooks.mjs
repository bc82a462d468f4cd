/**
 * Strobe's ES module load hook, registered by preload.cjs with `module.register(url, {data: {dir, counters}})`.
 *
 * It runs on Node's hooks thread: it reads the plan there too (plan.cjs, at every load) and replaces a listed
 * file's source (format "module" or "commonjs", given as a string, Buffer, typed array or ArrayBuffer) by its
 * rewritten text when the source's sha1 is the indexed one; otherwise the source is left as it was loaded. Hooks
 * registered after it (tsx's, by `--import tsx`) run before it and get its result from nextLoad: tsx compiles the
 * rewritten TypeScript.
 * Its failures go to the events file at once as batches with no events ({"v":1,"n":0,..., "errors": [...]}).
 */

import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const { PlanFile, substitute } = require('./plan.cjs');
const { Outbox, sharedCounters } = require('./outbox.cjs');

let plans = null;
let outbox = null;

function note(message) {
  outbox.note('', message);
}

export function initialize(data) {
  try {
    outbox = new Outbox({ dir: data.dir, counters: sharedCounters(data.counters), timers: false });
    plans = new PlanFile(data.dir, note, undefined, false);
  } catch {
    plans = null; // nothing to report with: this hook then passes every module through
  }
}

export async function load(url, context, nextLoad) {
  const result = await nextLoad(url, context);
  if (plans === null) return result;
  try {
    if (typeof url === 'string' && url.startsWith('file:') && result !== null && typeof result === 'object'
        && (result.format === 'module' || result.format === 'commonjs') && result.source != null) {
      const rewritten = substitute(result.source, fileURLToPath(url), plans.refresh(), note);
      if (rewritten !== null) return { ...result, source: rewritten };
    }
  } catch (error) {
    outbox.note('es module load', error);
  }
  return result;
}
