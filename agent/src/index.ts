import {
  emit,
  FlushRequest,
  FollowRequest,
  HooksRequest,
  PROTOCOL_VERSION,
  ReadMemoryRequest,
  WatchesRequest,
} from "./protocol.js";
import { onReadMemory } from "./memory.js";
import { installCrashHandler } from "./crash.js";
import { installExitHooks } from "./exit.js";
import { RECORD_SIZE, Tracer } from "./tracer.js";

const tracer = new Tracer();

function onHooks(request: HooksRequest): void {
  recv("hooks", onHooks);
  tracer.configureSampling(request.sampling);
  const failed = request.action === "add" ? tracer.add(request.functions) : tracer.remove(request.functions);
  emit({ type: "hooks_updated", requestId: request.requestId, activeCount: tracer.activeCount, failed });
}

function onFlush(request: FlushRequest): void {
  recv("flush", onFlush);
  tracer.flush(true);
  emit({ type: "flushed", requestId: request.requestId });
}

function onWatches(request: WatchesRequest): void {
  recv("watches", onWatches);
  const errors = tracer.setWatches(request.native, request.js);
  emit({ type: "watches_updated", requestId: request.requestId, activeCount: tracer.watchCount, errors });
}

function onFollow(request: FollowRequest): void {
  recv("follow", onFollow);
  tracer.setFollow(request.funcs);
  emit({ type: "follow_updated", requestId: request.requestId });
}

function onRead(request: ReadMemoryRequest): void {
  recv("read_memory", onRead);
  onReadMemory(request);
}

installExitHooks(() => tracer.flush(true));
installCrashHandler(() => tracer.flush(true));
recv("hooks", onHooks);
recv("flush", onFlush);
recv("read_memory", onRead);
recv("watches", onWatches);
recv("follow", onFollow);
tracer.start();
emit({
  type: "agent_loaded",
  protocolVersion: PROTOCOL_VERSION,
  pid: Process.id,
  recordSize: RECORD_SIZE,
  modules: Process.enumerateModules().map((m) => ({ name: m.name, path: m.path, base: m.base.toString(), size: m.size })),
});
