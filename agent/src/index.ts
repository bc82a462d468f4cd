// The agent's entry point: creates the runtimes' tracers (runtimes.ts), installs the exit hooks, the crash
// handler and the lifeline (common/forks.ts: the process ends when the daemon does), answers the host's requests
// (common/requests.ts) and says `agent_loaded` (common/protocol.ts). Every request goes to the native runtime:
// requests name no runtime yet.

import { installCrashHandler } from "./common/crash.js";
import { installExitHooks } from "./common/exit.js";
import { installLifeline } from "./common/forks.js";
import { installStdin } from "./common/stdin.js";
import { onReadMemory, onWriteMemory } from "./common/memory.js";
import { installOutputCapture } from "./common/output.js";
import { emit, PROTOCOL_VERSION } from "./common/protocol.js";
import {
  BreakpointsRequest,
  FlushRequest,
  FollowRequest,
  HooksRequest,
  PyCommandRequest,
  PySetupRequest,
  ReadMemoryRequest,
  WatchesRequest,
  WriteMemoryRequest,
} from "./common/requests.js";
import { installAltStacks } from "./native/altstack.js";
import { Breakpoints } from "./native/breakpoints.js";
import { RECORD_SIZE } from "./native/layout.js";
import { CPythonTracer } from "./cpython/tracer.js";
import { createRuntimes, RuntimeTracer } from "./runtimes.js";

const tracers = createRuntimes();
const all = Object.values(tracers);

function route(_request: HooksRequest | WatchesRequest | FollowRequest): RuntimeTracer {
  return tracers.native;
}

function flushAll(): void {
  for (const tracer of all) {
    tracer.flush(true);
  }
  breakpoints.sendLogged();
}

function onHooks(request: HooksRequest): void {
  recv("hooks", onHooks);
  const tracer = route(request);
  tracer.configureSampling(request.sampling);
  const failed = request.action === "add" ? tracer.add(request.functions, request.fastPath) : tracer.remove(request.functions);
  emit({ type: "hooks_updated", requestId: request.requestId, activeCount: tracer.activeCount, failed });
}

function onFlush(request: FlushRequest): void {
  recv("flush", onFlush);
  flushAll();
  emit({ type: "flushed", requestId: request.requestId });
}

function onWatches(request: WatchesRequest): void {
  recv("watches", onWatches);
  const tracer = route(request);
  const errors = tracer.setWatches(request.native, request.js, request.version);
  emit({ type: "watches_updated", requestId: request.requestId, activeCount: tracer.watchCount, errors });
}

function onFollow(request: FollowRequest): void {
  recv("follow", onFollow);
  route(request).setFollow(request.funcs);
  emit({ type: "follow_updated", requestId: request.requestId });
}

const python = new CPythonTracer();

function onPySetup(request: PySetupRequest): void {
  recv("py_setup", onPySetup);
  emit({ type: "py_setup_done", requestId: request.requestId, ...python.setup(request) });
}

function onPyCommand(request: PyCommandRequest): void {
  recv("py_command", onPyCommand);
  python.command(request);
}

const breakpoints = new Breakpoints(flushAll);

function onBreakpoints(request: BreakpointsRequest): void {
  recv("breakpoints", onBreakpoints);
  const failed = breakpoints.update(request.add, request.remove);
  emit({ type: "breakpoints_updated", requestId: request.requestId, failed });
}

function onWrite(request: WriteMemoryRequest): void {
  recv("write_memory", onWrite);
  onWriteMemory(request);
}

function onRead(request: ReadMemoryRequest): void {
  recv("read_memory", onRead);
  onReadMemory(request);
}

installExitHooks(flushAll);
installAltStacks(); // before the program runs: every alternate signal stack it installs is big enough
installCrashHandler(flushAll, (details) => breakpoints.onException(details));
installLifeline();
installOutputCapture(); // only on request: a process Strobe attached to (its stdio is its own)
installStdin();
recv("hooks", onHooks);
recv("flush", onFlush);
recv("read_memory", onRead);
recv("watches", onWatches);
recv("follow", onFollow);
recv("py_setup", onPySetup);
recv("py_command", onPyCommand);
recv("breakpoints", onBreakpoints);
recv("write_memory", onWrite);
for (const tracer of all) {
  tracer.start();
}
emit({
  type: "agent_loaded",
  protocolVersion: PROTOCOL_VERSION,
  pid: Process.id,
  recordSize: RECORD_SIZE,
  modules: Process.enumerateModules().map((m) => ({ name: m.name, path: m.path, base: m.base.toString(), size: m.size })),
});
