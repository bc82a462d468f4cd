// Breakpoints in native code: at a function's entry, an Interceptor hook; at a source line's first instruction
// (which may be too short for a hook's jump, or a jump's target), a one-byte int3. Its trap, which crash.ts's
// exception handler hands here first, only sends the thread on to a stub: a 16-byte landing hooked with
// Interceptor, then a relocated copy of the instruction the int3 covers, then a jump back (so the int3 stays armed
// for every thread). The breakpoint's work runs in the stub's hook, on the thread's own stack: a signal handler
// may run on a small alternate stack (Rust's main thread has one), too small for it. When its condition holds and
// its hit count is reached, a breakpoint stops the thread that hit it — and only that thread. The thread sends a `paused`
// report (registers, backtrace, the stack around its frame pointer: what a crash report carries) and waits in
// recv("resume:<tid>").wait(), which releases the script's lock: the other threads, their hooks and the host's
// requests (reads, trace changes) go on meanwhile. The host resumes it by posting `resume:<tid>`. When the script
// goes away (the daemon detaches, stops or dies), wait() throws and the thread goes on: a process is never left
// stopped by Strobe.

import { BreakpointFailure, BreakpointSpec, ConditionArg, LogpointHit, PauseReport, emit } from "../common/protocol.js";
import { snapshot } from "../common/crash.js";
import { monotonicNow } from "../common/memory.js";

type Condition = (context: X64CpuContext) => boolean;
type Message = (context: X64CpuContext) => string;

interface Armed {
  spec: BreakpointSpec;
  disarm: () => void;
  hits: number;
  message: Message | null; // a logpoint's: written to the timeline, the thread goes on
}

interface Trap {
  resumeAt: NativePointer; // the stub: the hooked landing, the relocated instruction, a jump back
}

const INT3 = 0xcc;
const MAX_LOGGED = 20000; // logpoint lines waiting to be sent; beyond, counted as dropped
const MAX_LOG_CHARS = 1000;
const LOG_BATCH_MS = 20;
const LANDING = 16; // the stub's first bytes, for the Interceptor hook's jump
const COPY_SIZE = 96; // the landing, one relocated instruction (RIP-relative ones grow: ~30 bytes), the jump back

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;
const RESERVED = new Set(["args", "arguments", "await", "break", "case", "catch", "class", "const", "continue",
  "debugger", "default", "delete", "do", "else", "enum", "eval", "export", "extends", "false", "finally", "for",
  "function", "if", "implements", "import", "in", "instanceof", "interface", "let", "new", "null", "package",
  "private", "protected", "public", "return", "static", "super", "switch", "this", "throw", "true", "try", "typeof",
  "var", "void", "while", "with", "yield"]);

// An argument's value as the condition sees it: its register's low `size` bytes, signed or not, as a number
// (exact up to 2^53).
function argValue(context: X64CpuContext, arg: ConditionArg): number {
  const raw = uint64((context as unknown as Record<string, NativePointer>)[arg.reg].toString());
  const bits = arg.size * 8;
  if (bits >= 64) {
    return arg.signed ? int64(raw.toString()).toNumber() : raw.toNumber();
  }
  const value = raw.and(uint64(1).shl(bits).sub(1)).toNumber();
  return arg.signed && value >= 2 ** (bits - 1) ? value - 2 ** bits : value;
}

// A JavaScript expression over the arguments by name and `args`, compiled once: a SyntaxError is the host's to
// report when the breakpoint is set.
function expression(spec: BreakpointSpec, text: string): (context: X64CpuContext) => unknown {
  const named = spec.args.filter((a) => IDENTIFIER.test(a.name) && !RESERVED.has(a.name));
  // eslint-disable-next-line @typescript-eslint/no-implied-eval
  const body = new Function(...named.map((a) => a.name), "args", `"use strict"; return (${text});`);
  return (context) => {
    const args = spec.args.map((a) => argValue(context, a));
    return body(...named.map((a) => args[spec.args.indexOf(a)]), args);
  };
}

function compile(spec: BreakpointSpec): Condition | null {
  if (spec.condition === undefined || spec.condition.trim() === "") {
    return null;
  }
  const condition = expression(spec, spec.condition);
  return (context) => Boolean(condition(context));
}

// A logpoint's template, "n={n} total={args[1] * 2}": text with `{expression}` parts, each evaluated like a
// condition (a part that throws shows `<error: ...>`).
function template(spec: BreakpointSpec): Message | null {
  if (spec.log === undefined) {
    return null;
  }
  const parts: (string | ((context: X64CpuContext) => unknown))[] = [];
  const pattern = /\{([^{}]+)\}/g;
  let last = 0;
  for (let found = pattern.exec(spec.log); found !== null; found = pattern.exec(spec.log)) {
    parts.push(spec.log.slice(last, found.index), expression(spec, found[1]));
    last = found.index + found[0].length;
  }
  parts.push(spec.log.slice(last));
  return (context) => parts.map((part) => {
    if (typeof part === "string") {
      return part;
    }
    try {
      return String(part(context));
    } catch (e) {
      return `<error: ${e}>`;
    }
  }).join("");
}

export class Breakpoints {
  private readonly armed = new Map<string, Armed>();
  private readonly traps = new Map<string, Trap>(); // by the int3's address
  private copies: NativePointer | null = null; // the page relocated instructions are written to
  private copiesUsed = 0;

  constructor(private readonly flush: () => void) {}

  get count(): number {
    return this.armed.size;
  }

  update(add: BreakpointSpec[], remove: string[]): BreakpointFailure[] {
    for (const id of remove) {
      this.armed.get(id)?.disarm();
      this.armed.delete(id);
    }
    const failed: BreakpointFailure[] = [];
    for (const spec of add) {
      try {
        this.arm(spec);
      } catch (e) {
        failed.push({ id: spec.id, error: `${e}` });
      }
    }
    Interceptor.flush();
    return failed;
  }

  private arm(spec: BreakpointSpec): void {
    this.armed.get(spec.id)?.disarm();
    this.armed.delete(spec.id);
    const condition = compile(spec);
    const state: Armed = { spec, disarm: () => {}, hits: 0, message: template(spec) };
    if (spec.kind === "line") {
      this.armTrap(state, condition);
    } else {
      const breakpoints = this;
      const listener = Interceptor.attach(ptr(spec.address), {
        onEnter() {
          breakpoints.hit(state, condition, this.context as X64CpuContext, this.threadId);
        },
      });
      state.disarm = () => listener.detach();
    }
    this.armed.set(spec.id, state);
  }

  private armTrap(state: Armed, condition: Condition | null): void {
    const at = ptr(state.spec.address);
    const key = at.toString();
    if (this.traps.has(key)) {
      throw new Error("another breakpoint is set at this address");
    }
    const original = at.readU8();
    if (original === INT3) {
      throw new Error("the instruction there is already an int3 (another debugger's, or the program's own)");
    }
    const resumeAt = this.relocate(at);
    const breakpoints = this;
    const listener = Interceptor.attach(resumeAt, {
      onEnter() {
        breakpoints.hit(state, condition, this.context as X64CpuContext, this.threadId, at);
      },
    });
    Interceptor.flush();
    Memory.patchCode(at, 1, (code) => code.writeU8(INT3));
    this.traps.set(key, { resumeAt });
    state.disarm = () => {
      Memory.patchCode(at, 1, (code) => code.writeU8(original));
      this.traps.delete(key);
      listener.detach(); // a thread sent to the stub before this still runs the instruction and goes back
    };
  }

  // A copy of the instruction at `at` that runs as it would there (X86Relocator rewrites RIP-relative operands),
  // followed by a jump to the next instruction.
  private relocate(at: NativePointer): NativePointer {
    if (this.copies === null || this.copiesUsed + COPY_SIZE > Process.pageSize) {
      this.copies = Memory.alloc(Process.pageSize);
      this.copiesUsed = 0;
    }
    const copy = this.copies.add(this.copiesUsed);
    let length = 0;
    Memory.patchCode(copy, COPY_SIZE, (code) => {
      const writer = new X86Writer(code, { pc: copy });
      writer.putNopPadding(LANDING);
      const relocator = new X86Relocator(at, writer);
      length = relocator.readOne();
      if (length === 0) {
        throw new Error("the instruction there cannot be relocated");
      }
      relocator.writeOne();
      writer.putJmpAddress(at.add(length));
      writer.flush();
    });
    this.copiesUsed += COPY_SIZE;
    return copy;
  }

  // crash.ts's exception handler asks first: a trap of one of these int3s sends its thread to the breakpoint's
  // stub (whose hook does the rest, off the signal's stack). False for any other exception.
  onException(details: ExceptionDetails): boolean {
    if (details.type !== "breakpoint") {
      return false;
    }
    const at = details.context.pc.sub(1); // the trap leaves the pc after the int3
    const trap = this.traps.get(at.toString());
    if (trap === undefined) {
      return false;
    }
    details.context.pc = trap.resumeAt; // nothing more on the signal's stack: the stub's hook does the rest
    return true;
  }

  // `at`: the line's address, when the context is the stub's (its pc is the copy's).
  private hit(state: Armed, condition: Condition | null, context: X64CpuContext, tid: number,
              at?: NativePointer): void {
    let conditionError: string | undefined;
    if (condition !== null) {
      try {
        if (!condition(context)) {
          return;
        }
      } catch (e) {
        conditionError = `${e}`;
      }
    }
    state.hits += 1;
    const wanted = state.spec.hitCount;
    if (wanted !== undefined && state.hits !== wanted) {
      return;
    }
    if (state.message !== null) {
      this.log(state, state.message, context, tid, conditionError);
      return;
    }
    this.pause(state, context, tid, conditionError, at);
  }

  private readonly logged: LogpointHit[] = [];
  private dropped = 0;
  private sending = false;

  // A logpoint's line, queued and sent in batches (a message per hit would cost more than the hit).
  private log(state: Armed, message: Message, context: X64CpuContext, tid: number,
              conditionError: string | undefined): void {
    if (this.logged.length >= MAX_LOGGED) {
      this.dropped += 1;
      return;
    }
    const [sec, nsec] = monotonicNow();
    const text = conditionError === undefined ? message(context) : `<condition failed: ${conditionError}>`;
    const hit: LogpointHit = { id: state.spec.id, tid, text: text.slice(0, MAX_LOG_CHARS), sec, nsec };
    const name = this.threadName(tid);
    if (name !== null) {
      hit.threadName = name;
    }
    this.logged.push(hit);
    if (!this.sending) {
      this.sending = true;
      setTimeout(() => this.sendLogged(), LOG_BATCH_MS);
    }
  }

  private readonly names = new Map<number, string | null>();

  // The thread's name when it first logs (read while it runs: it may be gone when the host stores the line).
  private threadName(tid: number): string | null {
    let name = this.names.get(tid);
    if (name === undefined) {
      try {
        name = File.readAllText(`/proc/self/task/${tid}/comm`).trim() || null;
      } catch {
        name = null;
      }
      this.names.set(tid, name);
    }
    return name;
  }

  sendLogged(): void {
    this.sending = false;
    if (this.logged.length === 0 && this.dropped === 0) {
      return;
    }
    const hits = this.logged.splice(0, this.logged.length);
    emit({ type: "logpoints", hits, dropped: this.dropped });
    this.dropped = 0;
  }

  private pause(state: Armed, context: X64CpuContext, tid: number, conditionError: string | undefined,
                at?: NativePointer): void {
    try {
      this.flush(); // the calls leading up to the stop are in the timeline before it
    } catch (e) {
      emit({ type: "log", level: "warning", message: `trace flush before a pause failed: ${e}` });
    }
    const taken = snapshot(context, at);
    const [sec, nsec] = monotonicNow();
    const report: PauseReport = {
      type: "paused", breakpointId: state.spec.id, tid, hit: state.hits, registers: taken.registers,
      frames: taken.frames, stackBase: taken.stackBase, stackSize: taken.stack === null ? 0 : taken.stack.byteLength,
      sec, nsec,
    };
    if (conditionError !== undefined) {
      report.conditionError = conditionError;
    }
    emit(report, taken.stack);
    try {
      recv(`resume:${tid}`, () => {}).wait();
    } catch {
      // the script is going away (detach, unload): the thread goes on
    }
  }
}
