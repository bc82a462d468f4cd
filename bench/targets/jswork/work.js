'use strict';
/**
 * The benchmark's JavaScript workload (bench/node_bench.py): `hot` is the function whose calls are timed, the others
 * are small functions the loops call rarely, so a tracer can be given a target that is not in the hot loop. Every
 * function is a leaf (none calls another), so wrapping the exports by hand (run.js consolelog) wraps every call.
 */

/** Called CALLS times per timed loop: a little integer mixing (a few ns once optimized). */
function hot(total, i) {
  let x = Math.imul(i ^ (i >>> 15), 0x2c1b3c6d);
  x ^= x >>> 12;
  return (total + (x & 0xffff)) | 0;
}

/** Called once after each timed loop: the one function traced when measuring the cost on untraced ones. */
function checksum(total) {
  return total & 0xffff;
}

/** Called once at start-up. */
function describe(calls, reps) {
  return `${reps} loops of ${calls} calls`;
}

module.exports = { hot, checksum, describe };
