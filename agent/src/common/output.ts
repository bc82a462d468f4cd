// What a process Strobe attached to writes to its stdout and stderr. A spawned process's fds 1 and 2 are Frida's
// pipes and reach the host through the device's `output` signal; a process that was already running keeps its
// own, so on the host's `capture_output` the agent hooks libc's `write` and `writev` and, for fd 1 or 2, sends
// the bytes the call really wrote (its return value) as `output` messages: the same stdout/stderr events. stdio
// (printf, puts, fwrite) ends in these calls; what was written before the attach is not seen.
//
// The listeners are C (output.c, a CModule): a call on any other fd never enters JavaScript (it costs the
// Interceptor's trampolines only, ~0.5-1 us instead of ~4-5 us with JavaScript listeners); for fd 1 or 2 they
// call onOutput below with each run of written bytes. The program's own write goes on unchanged (the hook only
// reads its buffer after the call). Hooks go with the script when the host detaches.
//
// `generated/output_c.ts` is not in the source tree: agent_build.py writes it into the copy of the agent it
// compiles, holding output.c as the string OUTPUT_C.

import { OUTPUT_C } from "./generated/output_c.js";
import { emit, OutputCapture } from "./protocol.js";
import { CaptureOutputRequest } from "./requests.js";
import { stackRewrites } from "./stacks.js";

const MAX_CHUNK = 1 << 20; // bytes per message: a huge write arrives in several

function sendWritten(fd: number, buffer: NativePointer, length: number): void {
  for (let at = 0; at < length; at += MAX_CHUNK) {
    const bytes = buffer.add(at).readByteArray(Math.min(MAX_CHUNK, length - at));
    if (bytes !== null) {
      emit({ type: "output", fd }, bytes);
    }
  }
}

function onOutput(fd: number, buffer: NativePointer, length: number | UInt64): void {
  sendWritten(fd, buffer, Number(length));
}

// The CModule and its callback live as long as the hooks, i.e. as long as the script.
let filter: { module: CModule; callback: NativeCallback<"void", ["int", "pointer", "size_t"]> } | null = null;

function outputFilter(): CModule {
  if (filter === null) {
    const callback = new NativeCallback(onOutput, "void", ["int", "pointer", "size_t"]);
    filter = { module: new CModule(OUTPUT_C, { on_output: callback }), callback };
  }
  return filter.module;
}

function hookWrite(address: NativePointer): void {
  const module = outputFilter();
  Interceptor.attach(address, { onEnter: module.write_enter, onLeave: module.write_leave });
}

function hookWritev(address: NativePointer): void {
  const module = outputFilter();
  Interceptor.attach(address, { onEnter: module.write_enter, onLeave: module.writev_leave });
}

let hooked: string[] | null = null;

function capture(requestId: number): OutputCapture {
  stackRewrites.allowed = false; // asked of a process Strobe attached to: it may leave it running (stacks.ts)
  if (hooked === null) {
    hooked = [];
    for (const [name, hook] of [["write", hookWrite], ["writev", hookWritev]] as const) {
      const address = Module.findGlobalExportByName(name);
      if (address !== null) {
        try {
          hook(address);
          hooked.push(name);
        } catch (e) {
          emit({ type: "log", level: "warning", message: `${name} not hooked for output capture: ${e}` });
        }
      }
    }
  }
  return hooked.length > 0 ? { type: "output_capture", requestId, hooked }
    : { type: "output_capture", requestId, hooked, error: "libc's write and writev could not be hooked" };
}

export function installOutputCapture(): void {
  recv("capture_output", function onCapture(request: CaptureOutputRequest): void {
    recv("capture_output", onCapture);
    emit(capture(request.requestId));
  });
}
