// What a process Strobe attached to writes to its stdout and stderr. A spawned process's fds 1 and 2 are Frida's
// pipes and reach the host through the device's `output` signal; a process that was already running keeps its
// own, so on the host's `capture_output` the agent hooks libc's `write` and `writev` and, for fd 1 or 2, sends
// the bytes the call really wrote (its return value) as `output` messages: the same stdout/stderr events. stdio
// (printf, puts, fwrite) ends in these calls; what was written before the attach is not seen.
//
// The program's own write goes on unchanged (the hook only reads its buffer after the call). Hooks go with the
// script when the host detaches.

import { emit, OutputCapture } from "./protocol.js";
import { CaptureOutputRequest } from "./requests.js";

const MAX_CHUNK = 1 << 20; // bytes per message: a huge write arrives in several

function sendWritten(fd: number, buffer: NativePointer, length: number): void {
  for (let at = 0; at < length; at += MAX_CHUNK) {
    const bytes = buffer.add(at).readByteArray(Math.min(MAX_CHUNK, length - at));
    if (bytes !== null) {
      emit({ type: "output", fd }, bytes);
    }
  }
}

function written(retval: InvocationReturnValue): number {
  const count = retval.toInt32(); // ssize_t; -1 on error. A single write over 2 GiB is not expected on fd 1/2
  return count > 0 ? count : 0;
}

function hookWrite(address: NativePointer): void {
  Interceptor.attach(address, {
    onEnter(args) {
      const fd = args[0].toInt32();
      this.fd = fd;
      if (fd === 1 || fd === 2) {
        this.buffer = args[1];
      }
    },
    onLeave(retval) {
      const fd = this.fd as number;
      if (fd === 1 || fd === 2) {
        sendWritten(fd, this.buffer as NativePointer, written(retval));
      }
    },
  });
}

function hookWritev(address: NativePointer): void {
  const iovSize = Process.pointerSize * 2; // struct iovec { void *iov_base; size_t iov_len; }
  Interceptor.attach(address, {
    onEnter(args) {
      const fd = args[0].toInt32();
      this.fd = fd;
      if (fd === 1 || fd === 2) {
        this.iov = args[1];
        this.count = args[2].toInt32();
      }
    },
    onLeave(retval) {
      const fd = this.fd as number;
      if (fd !== 1 && fd !== 2) {
        return;
      }
      let left = written(retval);
      const iov = this.iov as NativePointer;
      for (let i = 0; i < (this.count as number) && left > 0; i++) {
        const entry = iov.add(i * iovSize);
        const length = Math.min(entry.add(Process.pointerSize).readULong() as number, left);
        sendWritten(fd, entry.readPointer(), length);
        left -= length;
      }
    },
  });
}

let hooked: string[] | null = null;

function capture(requestId: number): OutputCapture {
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
