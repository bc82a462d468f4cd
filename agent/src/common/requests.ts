// Requests from the host (src/strobe/instrument/requests.py) to this agent; the agent's messages, emit() and
// PROTOCOL_VERSION are in protocol.ts. tests/instrument/test_protocol_contract.py reads every interface here with
// the TypeScript compiler and compares it with the host's TypedDicts: keep each request an interface with a `type`
// tag (the tagged interfaces that are not in protocol.ts's AgentMessage union are the requests).

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
  size: number; // the function's bytes, 0 when unknown (then never the fast path: it patches 16 bytes and more)
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
  fastPath: boolean; // native functions through Strobe's own trampolines where they may be (native/fastpath.ts)
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
