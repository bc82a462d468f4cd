// Messages between the host (src/strobe/instrument/protocol.py) and this agent.
// Both sides use the same `type` tags; bump PROTOCOL_VERSION on any change to a message's shape.

export const PROTOCOL_VERSION = 1;

export interface AgentLoaded {
  type: "agent_loaded";
  protocolVersion: number;
  pid: number;
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

export type AgentMessage = AgentLoaded | ProcessExit | AgentLog;

// Host -> agent.
export interface ExitAck {
  type: "exit_ack";
}

export function emit(message: AgentMessage): void {
  send(message);
}
