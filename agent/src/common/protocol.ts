// Messages between the host (src/strobe/instrument/protocol.py) and this agent, and emit() to send them.
// Both sides use the same `type` tags; bump PROTOCOL_VERSION on any change to a message's shape.
// tests/instrument/test_protocol_contract.py reads every interface here with the TypeScript compiler and
// compares it with the host's models and request builders: keep each message an interface with a `type` tag.

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

// ---- host -> agent ----

export interface ExitAck {
  type: "exit_ack";
}

// The crash report is stored: the crashing thread goes on to the signal's handler.
export interface CrashAck {
  type: "crash_ack";
}

export interface HookTarget {
  id: number;
  address: string;
}

export interface SamplingConfig {
  hotCallsPerSecond: number;
  sampleEvery: number;
}

// Send everything recorded so far, then answer `flushed`.
export interface FlushRequest {
  type: "flush";
  requestId: number;
}

export interface HooksRequest {
  type: "hooks";
  requestId: number;
  action: "add" | "remove";
  functions: HookTarget[];
  sampling: SamplingConfig;
}

// A read recipe, resolved by the host: start at `address` (relocated), for each deref add its offset
// and read a pointer there (null: stop with "Null pointer at <label>"), add `offset`, copy `size` bytes.
// `strings`: offsets in the copied bytes holding a char* to read as a C string (up to 1 KiB).
export interface ReadRecipe {
  label: string;
  address: string;
  derefs: { offset: number; label: string }[];
  offset: number;
  size: number;
  strings: number[];
}

export interface PollSpec {
  pollId: number;
  intervalMs: number;
  durationMs: number;
}

// Read once and answer `read_response`; with `poll`, answer at once (empty results) and send one
// `variable_snapshot` per tick, then `poll_complete`.
export interface ReadMemoryRequest {
  type: "read_memory";
  requestId: number;
  recipes: ReadRecipe[];
  poll?: PollSpec;
}

// Watches. `native`: up to 4 scalars at fixed addresses, read by the CModule in the hook (slot 0-3);
// `js`: read by a JavaScript callback (pointer chains, structs, expressions). `funcs`: the function ids
// a watch applies to; null: every traced function, including ones hooked later.
export interface NativeWatchSpec {
  slot: number;
  address: string;
  size: number;
  funcs: number[] | null;
}

export interface JsWatchSpec {
  id: number;
  label: string;
  recipe?: ReadRecipe;
  expr?: string;
  funcs: number[] | null;
}

export interface WatchesRequest {
  type: "watches";
  requestId: number;
  version: number; // chosen by the host, stamped on every batch recorded under these watches
  native: NativeWatchSpec[];
  js: JsWatchSpec[];
}

// Pointers followed at call time (see native/follow.ts). A node: `n` bytes to copy at the pointee, C-string
// pointers at offsets `s`, pointer fields at `p` (offset, node) to follow further; `t: 1` reads a C string.
// A function's slots: (key, register, node), register 0-5 = rdi..r9 on entry, 6 = rax on exit.
// A node of a follow plan: copy `n` bytes; C-string pointers at offsets `s`; pointers to follow [offset, node];
// counted data [data pointer offset, count offset, 0: the count is a u64 | 1: an end pointer, array node].
// t: 1 = a C string; 2 = an array node: at most `m` elements of `n` bytes, each following node `e`'s s/p/q.
export interface FollowNode {
  n: number;
  s?: number[];
  p?: [number, number][];
  q?: [number, number, number, number][];
  t?: number;
  m?: number;
  e?: number;
}

export interface FollowFunction {
  id: number;
  version: number;
  nodes: FollowNode[];
  slots: [string, number, number][];
  // values held in registers (key, registers 0-5 or 6 for rax, in order, node): their words are the node's bytes
  words?: [string, number[], number][];
  capture?: number; // WATCH_CAPTURE_* bits: float, stack and second return registers its signature needs
}

export interface FollowRequest {
  type: "follow";
  requestId: number;
  funcs: FollowFunction[];
}

// CPython: the tracer's bootstrap (Python source run with PyRun_SimpleString; "@SINK@" and "@CONTROL_FD@"
// are replaced by the batch callback's address and the control pipe's read end).
export interface PySetupRequest {
  type: "py_setup";
  requestId: number;
  bootstrap: string;
}

// CPython: one JSON command line for the tracer's thread (no answer; the tracer replies in a batch).
export interface PyCommandRequest {
  type: "py_command";
  command: string;
}

// Tie the process's life to the daemon's: the daemon (`pid`) holds both ends of a pipe for as long as it lives, and
// `fd` is its read end. Answered with `lifeline_state`.
export interface LifelineRequest {
  type: "lifeline";
  requestId: number;
  pid: number;
  fd: number;
}

// Make the pipe whose read end is `fd` in the daemon (`pid`) the program's standard input (descriptor 0), before
// it runs. Answered with `stdin_state`.
export interface StdinRequest {
  type: "stdin";
  requestId: number;
  pid: number;
  fd: number;
}

// Untie it: the daemon is about to detach and leave the process running. Answered with `lifeline_state`.
export interface ReleaseRequest {
  type: "release";
  requestId: number;
}

// Capture what the process writes to fds 1 and 2 from now on (a process Strobe attached to: a spawned one's stdio is
// Frida's pipes). Answered with `output_capture`.
export interface CaptureOutputRequest {
  type: "capture_output";
  requestId: number;
}

export interface WriteTarget {
  recipe: ReadRecipe; // where, as a read finds it (`size`: how many bytes `data` replaces)
  data: string; // hex
}

// Write each target's bytes (writable memory only); answered with `memory_written`.
export interface WriteMemoryRequest {
  type: "write_memory";
  requestId: number;
  targets: WriteTarget[];
}

// An argument a breakpoint's condition names: the integer register it arrives in, read as `size` bytes.
export interface ConditionArg {
  name: string;
  reg: string; // rdi, rsi, rdx, rcx, r8, r9
  size: number;
  signed: boolean;
}

// A program value a condition or message reads at each hit: from a register (its value, or memory it points into)
// or an address, through pointers, then `size` bytes of `kind` (the host's daemon/break_values.py plans it).
export interface ValueRead {
  reg?: string; // start at this register's value (rsp: the thread's stack pointer at the site) ...
  address?: string; // ... or at this address
  add: number; // added to the register's value
  derefs: number[]; // each: add the offset, read a pointer there, go on from it
  offset: number; // added last
  size: number;
  kind: "int" | "uint" | "float" | "bool" | "pointer" | "cstring";
  load: boolean; // read `size` bytes at the address found; false: the register's value is the value
  constant?: number; // a value the compiler folded: this, read nowhere
}

export interface BreakpointSpec {
  id: string;
  kind: "entry" | "line"; // a function's entry (an Interceptor hook) or a line's first instruction (an int3)
  address: string;
  condition?: string; // JavaScript over `args[i]` and $v(i), the program's values the host planned (`values`)
  args: ConditionArg[];
  values: ValueRead[];
  hitCount?: number; // stop at this hit only (1: the first)
  allThreads?: boolean; // a stop also stops the program's other threads (the host does it, with ptrace)
  log?: string; // a logpoint: this template's text goes to the timeline and the thread is not stopped
}

// Arm `add` and disarm `remove` (ids); answered with `breakpoints_updated`.
export interface BreakpointsRequest {
  type: "breakpoints";
  requestId: number;
  add: BreakpointSpec[];
  remove: string[];
}

export type StepKind = "over" | "into" | "out";

// Where a step may end (native/stepping.ts): runtime addresses, from the host's line tables.
export interface StepPlan {
  kind: StepKind;
  stops: string[]; // the first instruction of every other line of the paused function
  returnTo?: string; // the paused frame's return address, as the stack holds it ...
  unwoundReturn?: string; // ... and as the unwinder gave it (for when the stack holds Frida's trampoline's)
  fromEntry: boolean; // paused at a function's first instruction
  entry?: string; // the paused function's start ...
  entryCode?: string; // ... and its first bytes as built (hex): where an Interceptor hook's jump covers them
  callRanges: [string, string][]; // step into: the current line's code, whose calls are looked at
  intoRanges: [string, string][]; // step into: the code with line information (other calls are stepped over)
}

// Posted as `resume:<tid>` to the thread paused there: it goes on, or takes a step.
export interface ResumeRequest {
  type: "resume";
  action: "continue" | "step";
  plan?: StepPlan;
}

export function emit(message: AgentMessage, data?: ArrayBuffer | null): void {
  send(message, data);
}
