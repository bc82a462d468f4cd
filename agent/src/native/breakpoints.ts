// Breakpoints in native code: at a function's entry, an Interceptor hook; at a source line's first instruction, a
// one-byte int3 (traps.ts), whose handler runs on the thread's own stack. When its condition holds and its hit
// count is reached, a breakpoint stops the thread that hit it — and only that thread. The thread sends a `paused`
// report (registers, backtrace, the stack around its frame pointer: what a crash report carries) and waits in
// recv("resume:<tid>").wait(), which releases the script's lock: the other threads, their hooks and the host's
// requests (reads, trace changes) go on meanwhile. The host resumes it by posting `resume:<tid>`, to continue or
// to step (stepping.ts). When the script goes away (the daemon detaches, stops or dies), wait() throws and the
// thread goes on: a process is never left stopped by Strobe.

import {
  BreakpointFailure, BreakpointSpec, ConditionArg, LogpointHit, PauseReport, ResumeRequest, StepKind, emit,
} from "../common/protocol.js";
import { snapshot } from "../common/crash.js";
import { monotonicNow } from "../common/memory.js";
import { Stepper } from "./stepping.js";
import { Traps } from "./traps.js";

type Condition = (context: X64CpuContext) => boolean;
type Message = (context: X64CpuContext) => string;

interface Armed {
  spec: BreakpointSpec;
  disarm: () => void;
  hits: number;
  condition: Condition | null;
  message: Message | null; // a logpoint's: written to the timeline, the thread goes on
}

// What a pause report says of why the thread stopped.
type Why = Pick<PauseReport, "breakpointId" | "hit" | "conditionError" | "step" | "entry" | "stepError" | "skipped">;

const MAX_LOGGED = 20000; // logpoint lines waiting to be sent; beyond, counted as dropped
const MAX_LOG_CHARS = 1000;
const LOG_BATCH_MS = 20;

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
        if (!state.condition(context)) {
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
    this.stepper.cancel(tid); // a step this thread was taking ends here
    const why: Why = { breakpointId: state.spec.id, hit: state.hits, entry: state.spec.kind === "entry" };
    if (conditionError !== undefined) {
      why.conditionError = conditionError;
    }
    this.pause(context, tid, at, sp, why);
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

  // Stop the thread: report it, wait for the host, then go on or step (a step that cannot be taken stops it again
  // where it is, saying why).
  private pause(context: X64CpuContext, tid: number, at: NativePointer, sp: NativePointer, why: Why): void {
    try {
      this.flush(); // the calls leading up to the stop are in the timeline before it
    } catch (e) {
      emit({ type: "log", level: "warning", message: `trace flush before a pause failed: ${e}` });
    }
    const taken = snapshot(context, at, sp);
    const [sec, nsec] = monotonicNow();
    const report: PauseReport = {
      type: "paused", tid, ...why, registers: taken.registers, frames: taken.frames, stackBase: taken.stackBase,
      stackSize: taken.stack === null ? 0 : taken.stack.byteLength, sec, nsec,
    };
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
    try {
      this.stepper.begin(tid, resume.plan, context, at, sp);
    } catch (e) {
      const kind: StepKind = resume.plan.kind;
      this.pause(context, tid, at, sp, { ...why, step: kind, stepError: `${e}` });
    }
  }
}
