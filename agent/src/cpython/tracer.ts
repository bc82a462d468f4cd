// CPython: the agent only carries the host's Python tracer into the interpreter and its batches out.
// The tracer itself is Python (src/strobe/instrument/pytracer/), sent by the host in `py_setup` and run with
// PyRun_SimpleString under the GIL: at Py_RunMain's entry for a spawned program (the interpreter is ready,
// the user's first line has not run), at once when the interpreter is already running.
// Out: the tracer calls a NativeCallback (pointer, length) with one JSON batch; it leaves as `py_batch`.
// In: host commands (targets, depth, reads...) are written as JSON lines to a non-blocking pipe the
// tracer's own thread reads; a command that does not fit waits in a queue, never blocking this thread
// (which the tracer's thread may be waiting on to send a batch).

import { emit } from "../common/protocol.js";
import { PyCommandRequest, PySetupRequest } from "../common/requests.js";

const O_NONBLOCK = 0o4000;
const O_CLOEXEC = 0o2000000;
const EAGAIN = 11;
const RETRY_MS = 5;

function exported(name: string): NativePointer | null {
  return Module.findGlobalExportByName(name);
}

type PyState = "waiting" | "installed" | "unsupported";

export class CPythonTracer {
  private state: PyState = "waiting";
  private reason = "";
  private bootstrap = "";
  private writeFd = -1;
  private readFd = -1;
  // Commands not written yet: `data` is kept alive (it owns the allocation), `offset` bytes of it were written.
  private queue: { data: NativePointer; offset: number; length: number }[] = [];
  private retry: ReturnType<typeof setTimeout> | null = null;
  private sink: NativeCallback<"void", ["pointer", "size_t"]> | null = null;
  private runMainHooked = false;
  private readonly write = new SystemFunction(Module.getGlobalExportByName("write"), "int", ["int", "pointer", "size_t"]);
  private readonly strlen = new NativeFunction(Module.getGlobalExportByName("strlen"), "size_t", ["pointer"]);

  // Keep the tracer's bootstrap; install it now (a running interpreter) or at Py_RunMain (a spawned one).
  setup(request: PySetupRequest): { state: PyState; error?: string } {
    if (this.state !== "waiting") {
      return this.answer();
    }
    const ensure = exported("PyGILState_Ensure");
    const release = exported("PyGILState_Release");
    const run = exported("PyRun_SimpleString");
    const initialized = exported("Py_IsInitialized");
    if (ensure === null || release === null || run === null || initialized === null) {
      return this.refuse("this process exports no CPython C API (PyGILState_Ensure, PyRun_SimpleString)");
    }
    if (!this.openPipe()) {
      return this.answer();
    }
    this.sink = new NativeCallback(
      (data: NativePointer, length: number | UInt64) => {
        const size = typeof length === "number" ? length : length.toNumber();
        emit({ type: "py_batch" }, data.readByteArray(size));
      },
      "void",
      ["pointer", "size_t"],
    );
    this.bootstrap = request.bootstrap
      .replace("@SINK@", this.sink.toString())
      .replace("@CONTROL_FD@", String(this.readFd));
    const isInitialized = new NativeFunction(initialized, "int", []);
    if (isInitialized() !== 0) {
      this.install(ensure, release, run);
      return this.answer();
    }
    const runMain = exported("Py_RunMain");
    if (runMain === null) {
      return this.refuse("the interpreter is not initialized yet and exports no Py_RunMain to wait for");
    }
    if (!this.runMainHooked) {
      this.runMainHooked = true;
      const listener = Interceptor.attach(runMain, {
        onEnter: () => {
          listener.detach();
          this.install(ensure, release, run);
        },
      });
    }
    return this.answer();
  }

  // A JSON command for the tracer's thread; queued while the tracer is not installed yet.
  command(request: PyCommandRequest): void {
    const data = Memory.allocUtf8String(request.command + "\n");
    this.queue.push({ data, offset: 0, length: Number(this.strlen(data)) });
    if (this.state === "installed") {
      this.drain();
    }
  }

  private answer(): { state: PyState; error?: string } {
    return this.reason === "" ? { state: this.state } : { state: this.state, error: this.reason };
  }

  private refuse(reason: string): { state: PyState; error: string } {
    this.state = "unsupported";
    this.reason = reason;
    return { state: this.state, error: reason };
  }

  private openPipe(): boolean {
    const pipe2 = exported("pipe2");
    if (pipe2 === null) {
      this.refuse("libc has no pipe2");
      return false;
    }
    const fds = Memory.alloc(8);
    const rc = new NativeFunction(pipe2, "int", ["pointer", "int"])(fds, O_NONBLOCK | O_CLOEXEC);
    if (rc !== 0) {
      this.refuse("pipe2 failed");
      return false;
    }
    this.readFd = fds.readS32();
    this.writeFd = fds.add(4).readS32();
    return true;
  }

  private install(ensure: NativePointer, release: NativePointer, run: NativePointer): void {
    const gil = new NativeFunction(ensure, "int", [])();
    let rc = -1;
    try {
      rc = new NativeFunction(run, "int", ["pointer"])(Memory.allocUtf8String(this.bootstrap));
    } finally {
      new NativeFunction(release, "void", ["int"])(gil);
    }
    if (rc !== 0) {
      this.refuse("the tracer's bootstrap raised in the target (its traceback went to the target's stderr)");
      emit({ type: "py_state", state: this.state, error: this.reason });
      return;
    }
    this.state = "installed";
    emit({ type: "py_state", state: this.state });
    this.drain();
  }

  // Write queued commands until the pipe is full; the rest is retried shortly.
  private drain(): void {
    while (this.queue.length > 0) {
      const head = this.queue[0];
      const left = head.length - head.offset;
      const result = this.write(this.writeFd, head.data.add(head.offset), left) as UnixSystemFunctionResult<number>;
      if (result.value < 0) {
        if (result.errno !== EAGAIN) {
          emit({ type: "log", level: "warning", message: `python tracer control pipe: write failed (errno ${result.errno})` });
          this.queue = [];
          return;
        }
        break;
      }
      if (result.value < left) {
        head.offset += result.value;
        break;
      }
      this.queue.shift();
    }
    if (this.queue.length > 0 && this.retry === null) {
      this.retry = setTimeout(() => {
        this.retry = null;
        this.drain();
      }, RETRY_MS);
    }
  }
}
