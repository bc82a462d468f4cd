// Breakpoints in native code: at a function's entry, an Interceptor hook; at a source line's first instruction, a
// one-byte int3 (traps.ts), whose handler runs on the thread's own stack. When its condition holds and its hit
// count is reached, a breakpoint stops the thread that hit it — and only that thread. The thread sends a `paused`
// report (registers, backtrace, the stack around its frame pointer: what a crash report carries) and waits in
// recv("resume:<tid>").wait(), which releases the script's lock: the other threads, their hooks and the host's
// requests (reads, trace changes) go on meanwhile. The host resumes it by posting `resume:<tid>`, to continue or
// to step (stepping.ts). When the script goes away (the daemon detaches, stops or dies), wait() throws and the
// thread goes on: a process is never left stopped by Strobe.

import { BreakpointFailure, LogpointHit, PauseReport, emit } from "../common/protocol.js";
import { BreakpointSpec, ConditionArg, ResumeRequest, StepKind, ValueRead } from "../common/requests.js";
import { snapshot } from "../common/crash.js";
import { monotonicNow } from "../common/memory.js";
import { yieldTo } from "./fastpath.js";
import { Stepper } from "./stepping.js";
import { Traps } from "./traps.js";

type Condition = (context: X64CpuContext, sp: NativePointer) => boolean;
type Message = (context: X64CpuContext, sp: NativePointer) => string;

interface Armed {
  spec: BreakpointSpec;
  disarm: () => void;
  hits: number;
  condition: Condition | null;
  message: Message | null; // a logpoint's: written to the timeline, the thread goes on
}

// What a pause report says of why the thread stopped.
type Why = Pick<PauseReport,
  "breakpointId" | "hit" | "conditionError" | "step" | "entry" | "stepError" | "skipped" | "allThreads">;

const MAX_LOGGED = 20000; // logpoint lines waiting to be sent; beyond, counted as dropped
const MAX_LOG_CHARS = 1000;
const LOG_BATCH_MS = 20;
const MAX_STRING = 256; // bytes of a char * a condition or message reads

function register(context: X64CpuContext, sp: NativePointer, name: string): NativePointer {
  return name === "rsp" ? sp : (context as unknown as Record<string, NativePointer>)[name];
}

// A register's low `size` bytes, signed or not, as a number (exact up to 2^53).
function registerNumber(value: NativePointer, size: number, signed: boolean): number {
  const raw = uint64(value.toString());
  const bits = size * 8;
  if (bits >= 64) {
    return signed ? int64(raw.toString()).toNumber() : raw.toNumber();
  }
  const low = raw.and(uint64(1).shl(bits).sub(1)).toNumber();
  return signed && low >= 2 ** (bits - 1) ? low - 2 ** bits : low;
}

function argValue(context: X64CpuContext, arg: ConditionArg): number {
  return registerNumber(register(context, context.rsp, arg.reg), arg.size, arg.signed);
}

// One of the program's values at the hit, as the host planned it (a bad pointer throws: the expression fails).
function readValue(read: ValueRead, context: X64CpuContext, sp: NativePointer): number | boolean | string {
  if (read.constant !== undefined) {
    return read.constant;
  }
  if (!read.load) {
    const name = read.reg as string;
    if (name.startsWith("xmm")) { // a float or double parameter at a function's entry: the register's low bytes
      const bytes = new DataView((context as unknown as Record<string, ArrayBuffer>)[name]);
      return read.size === 4 ? bytes.getFloat32(0, true) : bytes.getFloat64(0, true);
    }
    return registerNumber(register(context, sp, name), read.size, read.kind === "int");
  }
  let at = read.reg !== undefined ? register(context, sp, read.reg).add(read.add) : ptr(read.address as string);
  for (const offset of read.derefs) {
    at = at.add(offset).readPointer();
    if (at.isNull()) {
      throw new Error("a null pointer on the way");
    }
  }
  at = at.add(read.offset);
  switch (read.kind) {
    case "float":
      return read.size === 4 ? at.readFloat() : at.readDouble();
    case "bool":
      return at.readU8() !== 0;
    case "pointer":
      return uint64(at.readPointer().toString()).toNumber();
    case "cstring":
      return cString(at.readPointer());
    default: {
      const signed = read.kind === "int";
      switch (read.size) {
        case 1: return signed ? at.readS8() : at.readU8();
        case 2: return signed ? at.readS16() : at.readU16();
        case 4: return signed ? at.readS32() : at.readU32();
        default: return signed ? at.readS64().toNumber() : at.readU64().toNumber();
      }
    }
  }
}

// The C string at `text`: up to its NUL or MAX_STRING bytes ("…" then), as UTF-8 (else byte by byte).
function cString(text: NativePointer): string {
  if (text.isNull()) {
    return "(null)";
  }
  let length = 0;
  while (length < MAX_STRING && text.add(length).readU8() !== 0) {
    length += 1;
  }
  if (length === 0) {
    return "";
  }
  let shown: string;
  try {
    shown = text.readUtf8String(length) ?? "";
  } catch {
    shown = text.readCString(length) ?? "";
  }
  return length === MAX_STRING ? `${shown}…` : shown;
}

// A JavaScript expression over `args[i]` and the host's planned values ($v(i), read only when evaluated), compiled
// once: a SyntaxError is the host's to report when the breakpoint is set.
function expression(spec: BreakpointSpec, text: string): (context: X64CpuContext, sp: NativePointer) => unknown {
  // eslint-disable-next-line @typescript-eslint/no-implied-eval
  const body = new Function("args", "$v", `"use strict"; return (${text});`);
  return (context, sp) => body(spec.args.map((a) => argValue(context, a)),
    (i: number) => readValue(spec.values[i], context, sp));
}

function compile(spec: BreakpointSpec): Condition | null {
  if (spec.condition === undefined || spec.condition.trim() === "") {
    return null;
  }
  const condition = expression(spec, spec.condition);
  return (context, sp) => Boolean(condition(context, sp));
}

// A logpoint's template, "n={$v(0)} total={args[1] * 2}": text with `{expression}` parts, each evaluated like a
// condition (a part that throws shows `<error: ...>`; a part that is one pointer shows it in hex).
function template(spec: BreakpointSpec): Message | null {
  if (spec.log === undefined) {
    return null;
  }
  const parts: (string | ((context: X64CpuContext, sp: NativePointer) => unknown))[] = [];
  const pattern = /\{([^{}]+)\}/g;
  let last = 0;
  for (let found = pattern.exec(spec.log); found !== null; found = pattern.exec(spec.log)) {
    const only = /^\s*\$v\((\d+)\)\s*$/.exec(found[1]);
    const evaluate = expression(spec, found[1]);
    const pointer = only !== null && spec.values[Number(only[1])]?.kind === "pointer";
    parts.push(spec.log.slice(last, found.index),
      pointer ? (c: X64CpuContext, sp: NativePointer) => `0x${(evaluate(c, sp) as number).toString(16)}` : evaluate);
    last = found.index + found[0].length;
  }
  parts.push(spec.log.slice(last));
  return (context, sp) => parts.map((part) => {
    if (typeof part === "string") {
      return part;
    }
    try {
      return String(part(context, sp));
    } catch (e) {
      return `<error: ${e}>`;
    }
  }).join("");
}

export class Breakpoints {
  private readonly armed = new Map<string, Armed>();
  private readonly atLines = new Map<string, Set<Armed>>(); // line breakpoints by their int3's address
  private readonly traps = new Traps((context, tid, at, sp) => this.onTrap(context, tid, at, sp));
  private readonly stepper = new Stepper(this.traps, (context, tid, at, sp, step, entry, skipped) =>
    this.pause(context, tid, at, sp, skipped.length > 0 ? { breakpointId: "", hit: 0, step, entry, skipped }
      : { breakpointId: "", hit: 0, step, entry }));

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
    const state: Armed = { spec, disarm: () => {}, hits: 0, condition: compile(spec), message: template(spec) };
    if (spec.kind === "line") {
      this.armLine(state);
    } else {
      const breakpoints = this;
      yieldTo(ptr(spec.address)); // a traced function on the fast path moves to Frida's trampolines
      const listener = Interceptor.attach(ptr(spec.address), {
        onEnter() {
          const context = this.context as X64CpuContext;
          breakpoints.hit(state, context, this.threadId, ptr(spec.address), context.rsp);
        },
      });
      state.disarm = () => listener.detach();
    }
    this.armed.set(spec.id, state);
  }

  private armLine(state: Armed): void {
    const at = ptr(state.spec.address);
    const key = at.toString();
    this.traps.arm(at);
    let here = this.atLines.get(key);
    if (here === undefined) {
      here = new Set();
      this.atLines.set(key, here);
    }
    here.add(state);
    state.disarm = () => {
      this.atLines.get(key)?.delete(state);
      this.traps.disarm(at);
    };
  }

  // crash.ts's exception handler asks first: true when the exception is one of Strobe's traps.
  onException(details: ExceptionDetails): boolean {
    return this.traps.onException(details);
  }

  // A trap at `at`: a step's end, or the line breakpoints there.
  private onTrap(context: X64CpuContext, tid: number, at: NativePointer, sp: NativePointer): void {
    if (this.stepper.onTrap(context, tid, at, sp)) {
      return; // one pause where a step ends at a breakpoint's line
    }
    for (const state of this.atLines.get(at.toString()) ?? []) {
      this.hit(state, context, tid, at, sp);
    }
  }

  private hit(state: Armed, context: X64CpuContext, tid: number, at: NativePointer, sp: NativePointer): void {
    let conditionError: string | undefined;
    if (state.condition !== null) {
      try {
        if (!state.condition(context, sp)) {
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
      this.log(state, state.message, context, sp, tid, conditionError);
      return;
    }
    this.stepper.cancel(tid); // a step this thread was taking ends here
    const why: Why = { breakpointId: state.spec.id, hit: state.hits, entry: state.spec.kind === "entry" };
    if (state.spec.allThreads === true) {
      why.allThreads = true;
    }
    if (conditionError !== undefined) {
      why.conditionError = conditionError;
    }
    this.pause(context, tid, at, sp, why);
  }

  private readonly stoppingAll = new Set<number>(); // threads stepping from a stop of every thread
  private readonly logged: LogpointHit[] = [];
  private dropped = 0;
  private sending = false;

  // A logpoint's line, queued and sent in batches (a message per hit would cost more than the hit).
  private log(state: Armed, message: Message, context: X64CpuContext, sp: NativePointer, tid: number,
              conditionError: string | undefined): void {
    if (this.logged.length >= MAX_LOGGED) {
      this.dropped += 1;
      return;
    }
    const [sec, nsec] = monotonicNow();
    const text = conditionError === undefined ? message(context, sp) : `<condition failed: ${conditionError}>`;
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

  // Stop the thread: report it, wait for the host, then go on or step (a step that cannot be taken stops it again
  // where it is, saying why).
  private pause(context: X64CpuContext, tid: number, at: NativePointer, sp: NativePointer, why: Why): void {
    try {
      this.flush(); // the calls leading up to the stop are in the timeline before it
    } catch (e) {
      emit({ type: "log", level: "warning", message: `trace flush before a pause failed: ${e}` });
    }
    const all = why.allThreads === true || this.stoppingAll.has(tid);
    this.stoppingAll.delete(tid);
    const taken = snapshot(context, at, sp);
    const [sec, nsec] = monotonicNow();
    const report: PauseReport = {
      type: "paused", tid, ...why, registers: taken.registers, frames: taken.frames, stackBase: taken.stackBase,
      stackSize: taken.stack === null ? 0 : taken.stack.byteLength, sec, nsec,
    };
    if (all) {
      report.allThreads = true; // the host stops these (Process.enumerateThreads leaves Frida's threads out)
      report.others = Process.enumerateThreads().map((t) => t.id).filter((id) => id !== tid);
    }
    emit(report, taken.stack);
    let request: ResumeRequest | null = null;
    try {
      recv(`resume:${tid}`, (message: ResumeRequest) => {
        request = message;
      }).wait();
    } catch {
      return; // the script is going away (detach, unload): the thread goes on
    }
    const resume = request as ResumeRequest | null;
    if (resume === null || resume.action !== "step" || resume.plan === undefined) {
      return;
    }
    if (all) {
      this.stoppingAll.add(tid); // where the step ends, the other threads are stopped again
    }
    try {
      this.stepper.begin(tid, resume.plan, context, at, sp);
    } catch (e) {
      const kind: StepKind = resume.plan.kind;
      this.pause(context, tid, at, sp, { ...why, step: kind, stepError: `${e}` });
    }
  }
}
