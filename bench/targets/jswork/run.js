'use strict';
/**
 * Benchmark target (bench/node_bench.py), a plain Node program (CommonJS, no dependency):
 *
 *     node run.js CALLS REPS [plain|consolelog]
 *
 * REPS timed loops of CALLS calls to work.hot(), each printing "loop <rep> <wall ns> <cpu ns> <waited ns>" (timed
 * inside the process with process.hrtime.bigint(), so start-up is not counted; cpu is the process's CPU time, waited
 * the main thread's time waiting for a CPU: see times()), then work.checksum() once and a 300 ms pause (timers run:
 * a tracer can write what it buffered). Then "done".
 *
 * `consolelog` is the naive peer of a Strobe-traced run: before the loops, every function work.js exports is
 * replaced by a wrapper written by hand that console.log's each call with its arguments ("call hot 0 1") and each
 * return with its value ("return hot 7"), so the program's stdout (a file, for the benchmark) is the trace.
 */

const fs = require('fs');
const work = require('./work');

const PAUSE_MS = 300;
const now = process.hrtime.bigint;

function logged(name, fn) {
  return function wrapper(...args) {
    console.log('call', name, ...args);
    const value = fn.apply(this, args);
    console.log('return', name, value);
    return value;
  };
}

function wrapByHand(module) {
  for (const [name, value] of Object.entries(module)) {
    if (typeof value === 'function') module[name] = logged(name, value);
  }
}

/** One timed loop (its own function, so V8 optimizes it whole rather than on-stack-replacing a loop of main). */
function loop(hot, calls) {
  let total = 0;
  for (let i = 0; i < calls; i++) total = hot(total, i);
  return total;
}

/**
 * [ns on a CPU, ns this thread waited for one]: the CPU time of the process (process.cpuUsage(), exact; every thread,
 * V8's helpers included) and the main thread's wait on the run queue (/proc/thread-self/schedstat, Linux; -1 where
 * there is none). schedstat's own run time is not used: it is updated only at the scheduler's tick.
 */
function times() {
  const used = process.cpuUsage();
  let waited = -1;
  try {
    waited = Number(fs.readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[1]);
  } catch {
    // not Linux
  }
  return [(used.user + used.system) * 1000, waited];
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main(argv) {
  const calls = Number(argv[0]);
  const reps = Number(argv[1]);
  const mode = argv[2] || 'plain';
  if (mode === 'consolelog') wrapByHand(work);
  else if (mode !== 'plain') throw new Error(`unknown mode ${mode}`);
  console.log(work.describe(calls, reps));
  const hot = work.hot;
  for (let rep = 0; rep < reps; rep++) {
    const before = times();
    const t0 = now();
    const total = loop(hot, calls);
    const t1 = now();
    const after = times();
    const waited = before[1] < 0 ? -1 : after[1] - before[1];
    console.log(`loop ${rep} ${t1 - t0} ${after[0] - before[0]} ${waited}`);
    work.checksum(total);
    await sleep(PAUSE_MS);
  }
  console.log('done');
}

main(process.argv.slice(2));
