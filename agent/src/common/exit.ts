// Reports the process's exit code. Frida reaps the child itself, so the host cannot waitpid() for it:
// the agent catches exit()/_exit() and waits a bounded time for the host's acknowledgement, so the message is out
// before the process is gone.

import { unheard } from "./forks.js";
import { CrashAck, emit, ExitAck } from "./protocol.js";

// The longest a thread waits for the host's acknowledgement (of an exit code, of a crash report). A daemon that
// is stopped or slow must not hold the program in exit() or a crash handler for longer.
export const ACK_WAIT_MS = 2000;

// Acknowledgements received, and messages sent that expect one, by type. Each message is acknowledged once, in
// order, so a wait ends when every message sent so far is acknowledged; one that timed out before (a stopped
// daemon) is then acknowledged first.
const acked = new Map<string, number>();
const expected = new Map<string, number>();

// Listens for the host's acknowledgements of `type` for the agent's lifetime.
export function listenForAcks(type: ExitAck["type"] | CrashAck["type"]): void {
  const on = (): void => {
    acked.set(type, (acked.get(type) ?? 0) + 1);
    recv(type, on);
  };
  recv(type, on);
}

// Waits until the host has acknowledged every `type` message sent so far (the one just sent included), at most
// ACK_WAIT_MS. The JavaScript lock is released while sleeping, so the acknowledgement can be received. Returns
// whether it was.
export function awaitAck(type: ExitAck["type"] | CrashAck["type"]): boolean {
  const want = (expected.get(type) ?? 0) + 1;
  expected.set(type, want);
  const deadline = Date.now() + ACK_WAIT_MS;
  while ((acked.get(type) ?? 0) < want) {
    if (Date.now() >= deadline) {
      return false;
    }
    Thread.sleep(0.001);
  }
  return true;
}

let reported = false;

let beforeExit: () => void = () => {};

function report(code: number): void {
  if (reported || unheard()) {
    return;
  }
  reported = true;
  beforeExit();
  emit({ type: "process_exit", code });
  if (!awaitAck("exit_ack")) {
    emit({ type: "log", level: "warning", message: `exit code ${code}: no acknowledgement within ${ACK_WAIT_MS} ms` });
  }
}

// `flush` runs first, so events recorded up to exit() reach the host before the exit code does.
export function installExitHooks(flush: () => void): void {
  beforeExit = flush;
  listenForAcks("exit_ack");
  for (const name of ["exit", "_exit", "_Exit"]) {
    const address = Module.findGlobalExportByName(name);
    if (address === null) {
      continue;
    }
    try {
      Interceptor.attach(address, {
        onEnter(args) {
          report(args[0].toInt32() & 0xff);
        },
      });
    } catch (e) {
      emit({ type: "log", level: "warning", message: `cannot hook ${name}: ${e}` });
    }
  }
}
