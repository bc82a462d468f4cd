// Crash capture: a fatal signal on any thread (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) is reported before
// the process goes on to die. The trace ring is flushed first (so the calls leading up to the crash are stored),
// then one `crash` message goes out with the registers, the backtrace (addresses with their modules: the host
// symbolizes) and the stack memory around the frame pointer, and the crashing thread waits (ACK_WAIT_MS at most)
// until the host says it has stored it. The handler then declines the exception, so the target's own handler or
// the default action runs exactly as it would without Strobe.

import { awaitAck, listenForAcks } from "./exit.js";
import { CrashFrame, CrashReport, emit } from "./protocol.js";
import { unheard } from "./forks.js";
import { monotonicNow } from "./memory.js";

const SIGNALS: Record<string, string> = {
  "access-violation": "SIGSEGV",
  "guard-page": "SIGSEGV",
  "stack-overflow": "SIGSEGV",
  abort: "SIGABRT",
  "illegal-instruction": "SIGILL",
  arithmetic: "SIGFPE",
};
const BELOW_FP = 512; // bytes of stack dumped below the frame pointer (locals) ...
const ABOVE_FP = 128; // ... and above it (saved registers, return address, caller's outgoing arguments)
const MAX_FRAMES = 64;
const REGISTERS = ["pc", "sp", "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "r8", "r9", "r10", "r11", "r12",
  "r13", "r14", "r15"];

let reporting = false;
// The thread and time of the last report: a program's own handler that re-raises the signal it was reported for
// (Python's faulthandler, crash reporters) comes back on the same thread at once, and is one death, one report.
let lastReport: { tid: number; at: number } | null = null;
const RERAISE_MS = 2000;

// The signal: SIGBUS is an access violation at an address that is mapped and allows the access (a file
// mapping past the file's end, a misaligned access the CPU refuses), which Frida reports like a SIGSEGV.
function signalOf(details: ExceptionDetails): string {
  const signal = SIGNALS[details.type] ?? details.type;
  if (details.type === "access-violation" && details.memory !== undefined) {
    const range = Process.findRangeByAddress(details.memory.address);
    const need = details.memory.operation === "write" ? "w" : details.memory.operation === "execute" ? "x" : "r";
    if (range !== null && range.protection.includes(need)) {
      return "SIGBUS";
    }
  }
  return signal;
}

// The pc, then the unwinder's frames. Where the unwinder gives up before reaching the program's own code
// (libc's abort() path has frames it cannot unwind through), the rest comes from scanning the stack for return
// addresses, marked `scanned`: likely right, but a stale value on the stack can slip in.
function frames(context: CpuContext): CrashFrame[] {
  const accurate = Thread.backtrace(context, Backtracer.ACCURATE);
  const main = Process.mainModule;
  const caller = accurate.find((a) => Process.findModuleByAddress(a) !== null);
  const pc = Process.findModuleByAddress(context.pc) !== null ? context.pc : hookedCallee(caller) ?? context.pc;
  const addresses: [NativePointer, boolean][] = [[pc, false]];
  for (const address of accurate) {
    addresses.push([address, false]);
  }
  if (!accurate.some((a) => main.base.compare(a) <= 0 && a.compare(main.base.add(main.size)) < 0)) {
    const fuzzy = Thread.backtrace(context, Backtracer.FUZZY);
    const last = accurate.length > 0 ? accurate[accurate.length - 1] : context.pc;
    const at = fuzzy.findIndex((a) => a.equals(last));
    const rest = at >= 0 ? fuzzy.slice(at + 1) : fuzzy.filter((a) => !accurate.some((b) => b.equals(a)));
    for (const address of rest) {
      addresses.push([address, true]);
    }
  }
  const out: CrashFrame[] = [];
  for (const [i, [address, scanned]] of addresses.entries()) {
    const module = Process.findModuleByAddress(address);
    if (module === null) {
      continue; // a bogus frame (a stack address, a stale value): not code
    }
    if (i === 1 && address.equals(context.pc)) {
      continue; // the unwinder's first entry repeating the pc
    }
    const frame: CrashFrame = { address: address.toString(), module: module.path, base: module.base.toString(),
                                returnAddress: i > 0 };
    if (scanned) {
      frame.scanned = true;
    }
    out.push(frame);
    if (out.length >= MAX_FRAMES) {
      break;
    }
  }
  return out;
}

// A pc outside every module is in Frida's relocated copy of a hooked function's first instructions (the code a
// hook moved to make room for its jump). The function is the one the caller's call instruction targets: its
// start stands for the pc.
function hookedCallee(returnAddress: NativePointer | undefined): NativePointer | null {
  if (returnAddress === undefined) {
    return null;
  }
  try {
    const call = Instruction.parse(returnAddress.sub(5));
    if (call.mnemonic === "call" && call.opStr.startsWith("0x")) {
      return ptr(call.opStr);
    }
  } catch {
    // not a direct call
  }
  return null;
}

function stackDump(fp: NativePointer): [string, ArrayBuffer | null] {
  // From the widest window to narrower ones: the frame may sit near the top or bottom of the stack mapping.
  for (const [below, above] of [[BELOW_FP, ABOVE_FP], [BELOW_FP, 16], [256, 16], [0, 16]]) {
    try {
      const start = fp.sub(below);
      const bytes = start.readByteArray(below + above);
      if (bytes !== null) {
        return [start.toString(), bytes];
      }
    } catch {
      // try a smaller window
    }
  }
  return [fp.toString(), null];
}

function report(details: ExceptionDetails, flush: () => void): void {
  try {
    flush();
  } catch (e) {
    emit({ type: "log", level: "warning", message: `trace flush before the crash report failed: ${e}` });
  }
  const context = details.context as X64CpuContext;
  const registers: Record<string, string> = {};
  for (const name of REGISTERS) {
    registers[name] = (context as unknown as Record<string, NativePointer>)[name].toString();
  }
  const [sec, nsec] = monotonicNow();
  const [stackBase, stack] = stackDump(context.rbp);
  const message: CrashReport = {
    type: "crash",
    tid: Process.getCurrentThreadId(),
    kind: details.type,
    signal: signalOf(details),
    address: details.address.toString(),
    registers,
    frames: frames(context),
    stackBase,
    stackSize: stack === null ? 0 : stack.byteLength,
    sec,
    nsec,
  };
  if (details.memory !== undefined) {
    message.memory = { operation: details.memory.operation, address: details.memory.address.toString() };
  }
  emit(message, stack);
  if (!awaitAck("crash_ack")) {
    emit({ type: "log", level: "warning", message: `crash report: no acknowledgement within the bound; going on` });
  }
}

// `flush` sends every trace record made so far; it runs before the report.
export function installCrashHandler(flush: () => void): void {
  listenForAcks("crash_ack");
  Process.setExceptionHandler((details) => {
    if (!(details.type in SIGNALS) || reporting || unheard()) {
      return false;
    }
    const tid = Process.getCurrentThreadId();
    if (lastReport !== null && lastReport.tid === tid && Date.now() - lastReport.at < RERAISE_MS) {
      return false; // the same death, re-raised by the program's handler after the report
    }
    reporting = true; // one report at a time: a second crash while one is reported goes unreported
    try {
      report(details, flush);
    } catch (e) {
      emit({ type: "log", level: "error", message: `crash report failed: ${e}` });
    } finally {
      reporting = false;
      lastReport = { tid, at: Date.now() };
    }
    return false; // not handled: the target's handler or the default action runs
  });
}
