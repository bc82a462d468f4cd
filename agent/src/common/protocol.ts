// Messages from this agent to the host (src/strobe/instrument/protocol.py), and emit() to send them; the host's
// requests are in requests.ts (src/strobe/instrument/requests.py). Both sides use the same `type` tags; bump
// PROTOCOL_VERSION on any change to a message's shape, in either direction.
// tests/instrument/test_protocol_contract.py reads every interface here and in requests.ts with the TypeScript
// compiler and compares it with the host's models and request builders: keep each message an interface with a
// `type` tag.

import { StepKind } from "./requests.js";

export const PROTOCOL_VERSION = 8;

export interface ModuleInfo {
  name: string;
  path: string;
  base: string;
  size: number;
}

// ---- agent -> host ----

export interface AgentLoaded {
  type: "agent_loaded";
  protocolVersion: number;
  pid: number;
  recordSize: number;
  modules: ModuleInfo[];
}

export interface ProcessExit {
  type: "process_exit";
  code: number;
}

export interface AgentLog {
  type: "log";
  level: "info" | "warning" | "error";
  message: string;
}

export interface HookFailure {
  id: number;
  error: string;
}

export interface HooksUpdated {
  type: "hooks_updated";
  requestId: number;
  activeCount: number;
  failed: HookFailure[];
}

// Followed by `count` binary trace records (layout: native/layout.ts).
export interface TraceBatch {
  type: "trace_batch";
  count: number;
  firstSeq: number; // sequence number of the first record; the others follow without gaps
  dropped: number; // records lost so far because the ring was full (cumulative)
  sampledOut: number; // calls of hot functions skipped by sampling so far (cumulative)
  threads: [number, string][]; // (thread id, name) of threads seen for the first time
  watchValues?: [number, Record<string, unknown>][]; // (sequence number, {JS watch id: value}) of this batch
  // the version of the watches its records were made under (WatchesRequest.version; 0: none set yet)
  watchVersion: number;
  // (sequence number, plan version, {argument index or "r": value}): pointers followed (native/follow.ts)
  followValues?: [number, number, Record<string, unknown>][];
}

export interface SamplingStateChange {
  type: "sampling_state_change";
  funcId: number;
  enabled: boolean;
  sampleRate: number;
  sampledOut: number;
}

export interface Flushed {
  type: "flushed";
  requestId: number;
}

// One target of a memory read (debug_read, watches): what was read, or why not. The bytes are in the
// message's binary payload at [dataOffset, dataOffset + size).
export interface ReadResult {
  label: string;
  address?: string; // the final address read
  dataOffset?: number;
  size?: number;
  strings?: Record<string, string | null>; // C strings pointed to from offsets of the read bytes
  error?: string;
}

export interface WatchError {
  id: number;
  error: string;
}

export interface WatchesUpdated {
  type: "watches_updated";
  requestId: number;
  activeCount: number;
  errors: WatchError[];
}

export interface FollowUpdated {
  type: "follow_updated";
  requestId: number;
}

export interface ReadResponse {
  type: "read_response";
  requestId: number;
  results: ReadResult[];
}

// One tick of a poll: every target read at the same instant (CLOCK_MONOTONIC sec + nsec).
export interface VariableSnapshot {
  type: "variable_snapshot";
  pollId: number;
  sec: number;
  nsec: number;
  results: ReadResult[];
}

export interface PollComplete {
  type: "poll_complete";
  pollId: number;
  sampleCount: number;
}

// A fatal signal (see crash.ts); followed by the stack bytes dumped at `stackBase` (`stackSize` of them).
export interface CrashFrame {
  address: string;
  module: string; // path
  base: string;
  returnAddress: boolean; // every frame but the first: the host looks up address - 1
  scanned?: boolean; // found by scanning the stack, not by unwinding
}

// The kernel's siginfo of a crash's signal, read from the signal frame (crash.ts): `code` is si_code (> 0 a fault the
// kernel raised, SEGV_MAPERR...; <= 0 a signal sent by kill(), raise(), sigqueue()...); `pid` and `uid` are the
// sender's, only for SI_USER, SI_QUEUE and SI_TKILL.
export interface Siginfo {
  signo: number;
  code: number;
  pid?: number;
  uid?: number;
}

export interface CrashReport {
  type: "crash";
  tid: number;
  kind: string; // Frida's exception type
  signal: string;
  address: string; // where it happened (the pc)
  memory?: { operation: string; address: string }; // only for a fault the kernel raised with an address
  // What caused the signal; "unknown" when the siginfo could not be read or verified (the cause is not known).
  siginfo?: Siginfo | "unknown";
  registers: Record<string, string>;
  frames: CrashFrame[];
  stackBase: string;
  stackSize: number;
  sec: number; // CLOCK_MONOTONIC, the trace clock
  nsec: number;
}

// CPython (cpython/tracer.ts): the answer to `py_setup`, and the tracer's state when it changes later
// (installed at Py_RunMain, or its bootstrap failed).
export interface PySetupDone {
  type: "py_setup_done";
  requestId: number;
  state: "waiting" | "installed" | "unsupported";
  error?: string;
}

export interface PyState {
  type: "py_state";
  state: "waiting" | "installed" | "unsupported";
  error?: string;
}

// One batch of the Python tracer, as it wrote it: UTF-8 JSON in the message's data.
export interface PyBatch {
  type: "py_batch";
}

// The answer to `lifeline` and `release` (common/forks.ts): what the kernel kills when the daemon ends, however it
// ends — this process, its whole process group (it leads one: a launched program and what it forks), or nothing
// (released, or the lifeline could not be tied: `error` says why).
export interface LifelineState {
  type: "lifeline_state";
  requestId: number;
  scope: "process" | "group" | "none";
  error?: string;
}

// The answer to `stdin` (common/stdin.ts): the daemon's pipe is the program's descriptor 0, or `error` says why not.
export interface StdinState {
  type: "stdin_state";
  requestId: number;
  error?: string;
}

// The answer to `capture_output` (common/output.ts): the libc functions hooked to see what the process writes to
// its stdout and stderr (none: `error` says why).
export interface OutputCapture {
  type: "output_capture";
  requestId: number;
  hooked: string[];
  error?: string;
}

// Bytes a process Strobe attached to wrote to `fd` (1: stdout, 2: stderr), in the message's data.
export interface OutputChunk {
  type: "output";
  fd: number;
}

// A thread stopped at a breakpoint (native/breakpoints.ts) and waiting for `resume:<tid>`; followed by the stack
// bytes dumped at `stackBase`, like a crash report. `conditionError`: the condition threw (it stops, as a debugger
// does, rather than skip a stop the user asked for).
export interface PauseReport {
  type: "paused";
  breakpointId: string;
  tid: number;
  hit: number; // the breakpoint's hits so far, this one included
  registers: Record<string, string>;
  frames: CrashFrame[];
  stackBase: string;
  stackSize: number;
  conditionError?: string;
  entry: boolean; // at a function's first instruction (its frame is not set up yet)
  step?: StepKind; // the end of a step (breakpointId is then "")
  stepError?: string; // the step asked for could not be taken: the thread is still where it was
  skipped?: string[]; // line starts the step could not stop at: inside an Interceptor hook's relocated code
  allThreads?: boolean; // the breakpoint stops every thread (or a step from such a stop ended)
  others?: number[]; // then: the program's other threads (Frida's own left out), for the host to stop
  sec: number; // CLOCK_MONOTONIC, the trace clock
  nsec: number;
}

// Lines of logpoints (breakpoints with a message: the thread is not stopped), sent in batches; `dropped`: lines
// the agent could not queue (the host was too slow to take them).
export interface LogpointHit {
  id: string;
  tid: number;
  threadName?: string;
  text: string;
  sec: number;
  nsec: number;
}

export interface LogpointBatch {
  type: "logpoints";
  hits: LogpointHit[];
  dropped: number;
}

// debug_write's answer: per target, the address written and its bytes before and after (hex), or why not.
export interface WriteResult {
  label: string;
  address?: string;
  previous?: string;
  current?: string;
  error?: string;
}

export interface MemoryWritten {
  type: "memory_written";
  requestId: number;
  results: WriteResult[];
}

export interface BreakpointFailure {
  id: string;
  error: string;
}

// The answer to `breakpoints`: the ones that could not be set, with why (the rest are armed).
export interface BreakpointsUpdated {
  type: "breakpoints_updated";
  requestId: number;
  failed: BreakpointFailure[];
}

export type AgentMessage =
  | OutputCapture
  | OutputChunk
  | MemoryWritten
  | PauseReport
  | LogpointBatch
  | BreakpointsUpdated
  | AgentLoaded
  | ProcessExit
  | AgentLog
  | HooksUpdated
  | TraceBatch
  | SamplingStateChange
  | Flushed
  | ReadResponse
  | WatchesUpdated
  | FollowUpdated
  | VariableSnapshot
  | PollComplete
  | CrashReport
  | PySetupDone
  | PyState
  | PyBatch
  | LifelineState
  | StdinState;

export function emit(message: AgentMessage, data?: ArrayBuffer | null): void {
  send(message, data);
}
