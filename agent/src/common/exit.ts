// Reports the process's exit code. Frida reaps the child itself, so the host cannot waitpid() for it:
// the agent catches exit()/_exit() and blocks until the host acknowledges, so the code is never lost.

import { unheard } from "./forks.js";
import { emit, ExitAck } from "./protocol.js";

let reported = false;

let beforeExit: () => void = () => {};

function report(code: number): void {
  if (reported || unheard()) {
    return;
  }
  reported = true;
  beforeExit();
  emit({ type: "process_exit", code });
  recv("exit_ack", (_ack: ExitAck) => {}).wait();
}

// `flush` runs first, so events recorded up to exit() reach the host before the exit code does.
export function installExitHooks(flush: () => void): void {
  beforeExit = flush;
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
