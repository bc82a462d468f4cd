// Messages between the host (src/strobe/instrument/protocol.py) and this agent.
// Both sides use the same `type` tags; bump PROTOCOL_VERSION on any change to a message's shape.

export const PROTOCOL_VERSION = 2;

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

// Followed by `count` binary trace records (see tracer.ts for the layout).
export interface TraceBatch {
  type: "trace_batch";
  count: number;
  firstSeq: number; // sequence number of the first record; the others follow without gaps
  dropped: number; // records lost so far because the ring was full (cumulative)
  sampledOut: number; // calls of hot functions skipped by sampling so far (cumulative)
  threads: [number, string][]; // (thread id, name) of threads seen for the first time
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

export type AgentMessage =
  | AgentLoaded
  | ProcessExit
  | AgentLog
  | HooksUpdated
  | TraceBatch
  | SamplingStateChange
  | Flushed;

// ---- host -> agent ----

export interface ExitAck {
  type: "exit_ack";
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

export function emit(message: AgentMessage, data?: ArrayBuffer | null): void {
  send(message, data);
}
