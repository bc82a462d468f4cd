// Crash capture: a fatal signal on any thread (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) is reported before
// the process goes on to die. The trace ring is flushed first (so the calls leading up to the crash are stored),
// then one `crash` message goes out with the registers, the backtrace (addresses with their modules: the host
// symbolizes) and the stack memory around the frame pointer, and the crashing thread waits (ACK_WAIT_MS at most)
// until the host says it has stored it. The handler then declines the exception, so the target's own handler or
// the default action runs exactly as it would without Strobe.
//
// What caused the signal comes from the kernel's siginfo, not from Frida's reading of it: Frida fills
// `details.memory.address` from si_addr whatever the signal, and for a signal sent by kill(), raise() or
// sigqueue() that slot holds the sender's pid and uid. The report says a memory access only for a fault the
// kernel raised (si_code > 0), and who sent a signal that was sent.

import { awaitAck, listenForAcks } from "./exit.js";
import { CrashFrame, CrashReport, Siginfo, emit } from "./protocol.js";
import { unheard } from "./forks.js";
import { monotonicNow } from "./memory.js";
import { withTrueStack } from "./stacks.js";

const SIGNALS: Record<string, string> = {
  "access-violation": "SIGSEGV",
  "guard-page": "SIGSEGV",
  "stack-overflow": "SIGSEGV",
  abort: "SIGABRT",
  "illegal-instruction": "SIGILL",
  arithmetic: "SIGFPE",
};
// The signals each of Frida's exception types stands for (an access violation is a SIGSEGV or a SIGBUS).
const SIGNAL_NUMBERS: Record<string, number[]> = {
  "access-violation": [11, 7],
  "guard-page": [11, 7],
  "stack-overflow": [11],
  abort: [6],
  "illegal-instruction": [4],
  arithmetic: [8],
  breakpoint: [5], // SIGTRAP and SIGSYS are not reported, but go through Frida's handler too (see redeliver)
  system: [31],
};
const SIGNAL_NAMES: Record<number, string> = { 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 11: "SIGSEGV" };
const BELOW_FP = 512; // bytes of stack dumped below the frame pointer (locals) ...
const ABOVE_FP = 128; // ... and above it (saved registers, return address, caller's outgoing arguments)
const FRAMES_STACK = 64 * 1024; // bytes of stack dumped for a stopped thread's frames (a pause)
const RED_ZONE = 128; // bytes below the stack pointer a function may use without moving it (System V x86-64)
const MAX_FRAMES = 64;
const REGISTERS = ["pc", "sp", "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "r8", "r9", "r10", "r11", "r12",
  "r13", "r14", "r15"];

let reporting = false;
// The thread and time of the last report: a program's own handler that re-raises the signal it was reported for
// (Python's faulthandler, crash reporters) comes back on the same thread at once, and is one death, one report.
let lastReport: { tid: number; at: number } | null = null;
const RERAISE_MS = 2000;

// The kernel's siginfo of the signal being handled (Linux x86_64). Frida's `nativeContext` is the ucontext the
// kernel put in the signal frame, and the frame (struct rt_sigframe) has the siginfo right after it: the kernel's
// ucontext is 304 bytes (flags, link, stack, the 256-byte sigcontext, an 8-byte mask). It is trusted only if the
// frame's saved pc is the context's and si_signo is a signal Frida's exception type can stand for; otherwise it is
// null and the report's cause "unknown". The sender's pid and uid are kept only for a signal a process sent with
// them (SI_USER, SI_QUEUE, SI_TKILL): for a fault those bytes are si_addr.
const UCONTEXT_SIZE = 304;
const UCONTEXT_RIP = 168; // uc_mcontext (at 40) .rip (the 17th of its registers)
const SI_QUEUE = -1;
const SI_TKILL = -6;
const SI_USER = 0;

function signalInfo(details: ExceptionDetails): Siginfo | null {
  if (Process.platform !== "linux" || Process.arch !== "x64") {
    return null;
  }
  try {
    const frame = details.nativeContext;
    if (!frame.add(UCONTEXT_RIP).readPointer().equals(details.context.pc)) {
      return null;
    }
    const info = frame.add(UCONTEXT_SIZE);
    const signo = info.readS32();
    if (!(SIGNAL_NUMBERS[details.type] ?? []).includes(signo)) {
      return null;
    }
    const code = info.add(8).readS32();
    if (code === SI_USER || code === SI_QUEUE || code === SI_TKILL) {
      return { signo, code, pid: info.add(16).readS32(), uid: info.add(20).readU32() };
    }
    return { signo, code };
  } catch {
    return null;
  }
}

// The pc, then the unwinder's frames. Where the unwinder gives up before reaching the program's own code
// (libc's abort() path has frames it cannot unwind through), the rest comes from scanning the stack for return
// addresses, marked `scanned`: likely right, but a stale value on the stack can slip in. A thread whose stack pointer
// is past the end of its stack (a stack overflow, in the guard page) has its pc only: Frida's unwinders never return
// there (measured: the process hung in Thread.backtrace, either unwinder).
function frames(context: CpuContext, at?: NativePointer): CrashFrame[] {
  const unwindable = readable(context.sp);
  const accurate = unwindable ? Thread.backtrace(context, Backtracer.ACCURATE) : [];
  const main = Process.mainModule;
  const caller = accurate.find((a) => Process.findModuleByAddress(a) !== null);
  const pc = at ?? (Process.findModuleByAddress(context.pc) !== null ? context.pc
    : hookedCallee(caller) ?? context.pc);
  const addresses: [NativePointer, boolean][] = [[pc, false]];
  for (const address of accurate) {
    addresses.push([address, false]);
  }
  if (unwindable && !accurate.some((a) => main.base.compare(a) <= 0 && a.compare(main.base.add(main.size)) < 0)) {
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

function readable(address: NativePointer): boolean {
  try {
    address.readPointer();
    return true;
  } catch {
    return false;
  }
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

// A crash's dump: the stack around the frame pointer, from the widest window to narrower ones (the frame may sit
// near the top or bottom of the stack mapping).
function aroundFramePointer(fp: NativePointer): [string, ArrayBuffer | null] {
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

// A stopped thread's dump, for the host to unwind its frames and read their variables: from the red zone below the
// stack pointer (a leaf function's locals may be there) up the stack, FRAMES_STACK bytes at most, within the
// stack's mapping. Falls back to the crash's window.
function upTheStack(sp: NativePointer, fp: NativePointer): [string, ArrayBuffer | null] {
  try {
    const range = Process.findRangeByAddress(sp);
    if (range !== null) {
      const end = range.base.add(range.size);
      let start = sp.sub(RED_ZONE);
      if (start.compare(range.base) < 0) {
        start = range.base;
      }
      const size = Math.min(FRAMES_STACK, end.sub(start).toUInt32());
      const bytes = start.readByteArray(size);
      if (bytes !== null) {
        return [start.toString(), bytes];
      }
    }
  } catch {
    // the crash's window then
  }
  return aroundFramePointer(fp);
}

// Frida's signal handler, when the program's disposition of a signal nobody handled is the default, puts the
// default back and returns, counting on the faulting instruction to fault again. A sent signal (kill(), raise(),
// abort()) is not sent again: the program would go on as if it were ignored (measured: raise(SIGSEGV) returned
// under Frida, with or without a script). So a sent signal whose disposition is the default is sent again, blocked
// until the handler returns: it then meets the default action, as it would have without Strobe. The program's
// disposition is what sigaction() says (Frida answers with the program's own, not its handler).
const SIG_BLOCK = 0;
const SIGACTION_SIZE = 152; // glibc's struct sigaction on x86_64: handler, 128-byte mask, flags, restorer
const SIGSET_SIZE = 128;

class Redelivery {
  private readonly sigaction = new NativeFunction(Module.getGlobalExportByName("sigaction"), "int",
                                                  ["int", "pointer", "pointer"]);
  private readonly sigmask = new NativeFunction(Module.getGlobalExportByName("pthread_sigmask"), "int",
                                                ["int", "pointer", "pointer"]);
  private readonly raise = new NativeFunction(Module.getGlobalExportByName("raise"), "int", ["int"]);
  private readonly action = Memory.alloc(SIGACTION_SIZE);
  private readonly set = Memory.alloc(SIGSET_SIZE);

  // After a sent signal was reported (or not): make sure the default action still happens.
  redeliver(signo: number): void {
    if (this.sigaction(signo, NULL, this.action) !== 0 || !this.action.readPointer().isNull()) {
      return; // the program's handler (Frida calls it) or SIG_IGN: as without Strobe
    }
    this.set.writeByteArray(new Array(SIGSET_SIZE).fill(0));
    const bit = signo - 1;
    this.set.add(bit >> 3).writeU8(1 << (bit & 7));
    this.sigmask(SIG_BLOCK, this.set, NULL); // the thread's mask before the signal comes back on return
    this.raise(signo);
  }
}

// What a stopped thread looks like to the host (a crash, a breakpoint's pause): its registers, its backtrace and
// a dump of its stack (sent as the message's data).
export interface ThreadSnapshot {
  registers: Record<string, string>;
  frames: CrashFrame[];
  stackBase: string;
  stack: ArrayBuffer | null;
}

// `at`, `sp`: where the thread really is and its stack pointer, when the context's are a copy's (a trap's stub).
// `stack`: "frames" dumps up the stack from the stack pointer (64 KiB: the frames of a paused thread, each one's
// variables), "crash" only around the frame pointer (640 bytes: a dying thread's report stays small).
export function snapshot(context: CpuContext, at?: NativePointer, sp?: NativePointer,
                         stack: "frames" | "crash" = "frames"): ThreadSnapshot {
  // The thread's own stack as its unwind information describes it (stacks.ts); a crashing thread's stays so.
  return withTrueStack(context.sp, () => {
    const x64 = context as X64CpuContext;
    const registers: Record<string, string> = {};
    for (const name of REGISTERS) {
      registers[name] = (x64 as unknown as Record<string, NativePointer>)[name].toString();
    }
    if (at !== undefined) {
      registers.pc = at.toString();
    }
    if (sp !== undefined) {
      registers.sp = sp.toString();
    }
    const [stackBase, dump] = stack === "frames" ? upTheStack(ptr(registers.sp), x64.rbp) : aroundFramePointer(x64.rbp);
    return { registers, frames: frames(context, at), stackBase, stack: dump };
  }, stack === "crash");
}

function report(details: ExceptionDetails, info: Siginfo | null, flush: () => void): void {
  try {
    flush();
  } catch (e) {
    emit({ type: "log", level: "warning", message: `trace flush before the crash report failed: ${e}` });
  }
  const { registers, frames: backtrace, stackBase, stack } = snapshot(details.context, undefined, undefined, "crash");
  const [sec, nsec] = monotonicNow();
  const message: CrashReport = {
    type: "crash",
    tid: Process.getCurrentThreadId(),
    kind: details.type,
    signal: info !== null ? SIGNAL_NAMES[info.signo] : SIGNALS[details.type],
    address: details.address.toString(),
    siginfo: info ?? "unknown",
    registers,
    frames: backtrace,
    stackBase,
    stackSize: stack === null ? 0 : stack.byteLength,
    sec,
    nsec,
  };
  // A memory access only for a fault the kernel raised with an address (SI_KERNEL, 0x80, has none).
  if (details.memory !== undefined && info !== null && info.code > 0 && info.code !== 0x80) {
    message.memory = { operation: details.memory.operation, address: details.memory.address.toString() };
  }
  emit(message, stack);
  if (!awaitAck("crash_ack")) {
    emit({ type: "log", level: "warning", message: `crash report: no acknowledgement within the bound; going on` });
  }
}

// `flush` sends every trace record made so far; it runs before the report.
// `first` sees every exception before the crash report: true when it handled it (a breakpoint's trap).
export function installCrashHandler(flush: () => void, first: (details: ExceptionDetails) => boolean): void {
  listenForAcks("crash_ack");
  let redelivery: Redelivery | null = null;
  try {
    redelivery = new Redelivery();
  } catch (e) {
    emit({ type: "log", level: "warning", message: `a sent signal may not meet its default action: ${e}` });
  }
  Process.setExceptionHandler((details) => {
    if (first(details)) {
      return true;
    }
    const info = signalInfo(details);
    try {
      maybeReport(details, info, flush);
    } finally {
      if (info !== null && info.code <= 0 && redelivery !== null) {
        try {
          redelivery.redeliver(info.signo);
        } catch (e) {
          emit({ type: "log", level: "error", message: `cannot send signal ${info.signo} again: ${e}` });
        }
      }
    }
    return false; // not handled: the target's handler or the default action runs
  });
}

function maybeReport(details: ExceptionDetails, info: Siginfo | null, flush: () => void): void {
  if (!(details.type in SIGNALS) || reporting || unheard()) {
    return;
  }
  const tid = Process.getCurrentThreadId();
  if (lastReport !== null && lastReport.tid === tid && Date.now() - lastReport.at < RERAISE_MS) {
    return; // the same death, re-raised by the program's handler after the report
  }
  reporting = true; // one report at a time: a second crash while one is reported goes unreported
  try {
    report(details, info, flush);
  } catch (e) {
    emit({ type: "log", level: "error", message: `crash report failed: ${e}` });
  } finally {
    reporting = false;
    lastReport = { tid, at: Date.now() };
  }
}
