import { emit, PROTOCOL_VERSION } from "./protocol.js";
import { installExitHooks } from "./exit.js";

installExitHooks();
emit({ type: "agent_loaded", protocolVersion: PROTOCOL_VERSION, pid: Process.id });
