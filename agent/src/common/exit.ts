// Reports the process's exit code. Frida reaps the child itself, so the host cannot waitpid() for it: the agent
// catches the ways a program ends and reports the code, after the trace records made so far, waiting a bounded
// time for the host's acknowledgement so the message is out before the process is gone.
//
// The ways caught: exit(), _exit(), _Exit(); libc's syscall() wrapper asked for exit_group (a CModule filter, so
// the program's other syscall() calls run no JavaScript); the sanitizers' internal__exit (ASAN, TSan, UBSan end
// through it with an inline `syscall` instruction once they have reported). A code reported again differently
// (an atexit handler or LeakSanitizer calling _exit() with another code after exit()) replaces the first.
// An inline `syscall` instruction anywhere else cannot be hooked: the host learns that code from the kernel
// (daemon/exits.py), and records made since the last drain are lost with the process.

import { unheard } from "./forks.js";
import { emit } from "./protocol.js";
import { CrashAck, ExitAck } from "./requests.js";

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

let reported: number | null = null;

let beforeExit: () => void = () => {};

function report(code: number): void {
  if (reported === code || unheard()) {
    return; // exit() reaching _exit() with the same code is one end
  }
  reported = code;
  beforeExit();
  emit({ type: "process_exit", code });
  if (!awaitAck("exit_ack")) {
    emit({ type: "log", level: "warning", message: `exit code ${code}: no acknowledgement within ${ACK_WAIT_MS} ms` });
  }
}

const EXIT_GROUP: Partial<Record<Architecture, number>> = { x64: 231, arm64: 94 };

// The filter on libc's syscall(): only exit_group calls back into JavaScript.
const SYSCALL_FILTER = `
#include <gum/guminterceptor.h>

extern void on_exit_group (int code);

void
onEnter (GumInvocationContext * ic)
{
  if ((glong) gum_invocation_context_get_nth_argument (ic, 0) == EXIT_GROUP)
    on_exit_group ((int) (gsize) gum_invocation_context_get_nth_argument (ic, 1));
}
`;

const keptAlive: unknown[] = []; // the filter's CModule and callback live as long as its hook

function hookSyscallWrapper(): void {
  const address = Module.findGlobalExportByName("syscall");
  const number = EXIT_GROUP[Process.arch];
  if (address === null || number === undefined) {
    return;
  }
  const callback = new NativeCallback((code: number) => report(code & 0xff), "void", ["int"]);
  const module = new CModule(`#define EXIT_GROUP ${number}\n${SYSCALL_FILTER}`, { on_exit_group: callback });
  Interceptor.attach(address, module as unknown as ScriptInvocationListenerCallbacks);
  keptAlive.push(module, callback);
}

const SANITIZER_EXIT = "_ZN11__sanitizer14internal__exitEi"; // __sanitizer::internal__exit(int), a local symbol

function hookSanitizerExits(): void {
  for (const module of Process.enumerateModules()) {
    if (module.findExportByName("__sanitizer_set_death_callback") === null) {
      continue; // no sanitizer runtime in it
    }
    const address = module.findSymbolByName(SANITIZER_EXIT);
    if (address !== null) {
      Interceptor.attach(address, { onEnter(args) { report(args[0].toInt32() & 0xff); } });
    }
  }
}

// `flush` runs first, so events recorded up to the exit reach the host before the exit code does.
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
  const more = [["syscall()", hookSyscallWrapper], ["the sanitizers' exit", hookSanitizerExits]] as const;
  for (const [what, hook] of more) {
    try {
      hook();
    } catch (e) {
      emit({ type: "log", level: "warning", message: `cannot hook ${what}: ${e}` });
    }
  }
}
