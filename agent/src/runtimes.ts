// The runtimes this agent can trace, and what index.ts asks of each. A runtime (native code today; CPython or
// Node later) is a folder under src/ whose tracer implements RuntimeTracer, plus one entry in RUNTIMES.
// Messages are in common/protocol.ts and the host's requests in common/requests.ts; the common modules (exit,
// crash, memory reads) know runtimes only through flush().

import { HookFailure, WatchError } from "./common/protocol.js";
import { FollowFunction, HookTarget, JsWatchSpec, NativeWatchSpec, SamplingConfig } from "./common/requests.js";
import { NativeTracer } from "./native/tracer.js";

export interface RuntimeTracer {
  // Hook these functions (ids chosen by the host), or remove their hooks; answers the ones that failed.
  add(targets: HookTarget[], fastPath: boolean): HookFailure[];
  remove(targets: HookTarget[]): HookFailure[];
  configureSampling(config: SamplingConfig): void;
  // Replace the watches (`version` is stamped on the batches recorded under them); answers the ones refused.
  // What was recorded under the old ones is sent first.
  setWatches(native: NativeWatchSpec[], js: JsWatchSpec[], version: number): WatchError[];
  // Add or replace pointer-following plans. What was recorded under the old ones is sent first.
  setFollow(funcs: FollowFunction[]): void;
  // Send everything recorded so far; `final`: the process is exiting or crashing.
  flush(final?: boolean): void;
  readonly activeCount: number; // functions hooked
  readonly watchCount: number;
  // Begin sending recorded events on its own (called once, after the message handlers are in place).
  start(): void;
}

const RUNTIMES = {
  native: (): RuntimeTracer => new NativeTracer(),
};

export type RuntimeName = keyof typeof RUNTIMES;

// One tracer per runtime, created when the agent loads.
export function createRuntimes(): Record<RuntimeName, RuntimeTracer> {
  const tracers = {} as Record<RuntimeName, RuntimeTracer>;
  for (const name of Object.keys(RUNTIMES) as RuntimeName[]) {
    tracers[name] = RUNTIMES[name]();
  }
  return tracers;
}
