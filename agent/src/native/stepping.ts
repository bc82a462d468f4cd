// Steps of a paused thread at source-line granularity. The host, which knows the line tables, sends the plan with
// the resume: the first address of every other line of the paused function (`stops`), the return address
// (`returnTo`), and for a step into, the code of the current line (whose calls are looked at) and the code that
// has line information (`intoRanges`: a call elsewhere, into a library without it, is stepped over). The thread
// goes on with temporary traps at those places, which only it (its tid) stops at:
// - a stop counts in the paused frame only: its stack pointer at least the paused one (a recursive call's deeper
//   frames are below it). Paused at a function's first instruction, the frame is not set up yet: the first stop
//   reached below the entry's stack pointer is in it (nothing is called before the prologue ends).
// - the return address counts once the frame is gone: a stack pointer above the paused one.
// - a step into also stops at the entry of a function the current line calls: a direct call's target, or an
//   indirect call's, read from the registers when the thread reaches the call.
// The first place reached ends the step: every temporary trap goes, and the thread pauses there. A breakpoint the
// thread hits meanwhile ends it too (its pause is the answer).

import { StepKind, StepPlan } from "../common/requests.js";
import { yieldTo } from "./fastpath.js";
import { Traps } from "./traps.js";

// How a step ends: where, and whether it is a function's first instruction (its frame not set up yet).
export type Pause = (context: X64CpuContext, tid: number, at: NativePointer, sp: NativePointer, step: StepKind,
                     entry: boolean, skipped: string[]) => void;

const HOOK_BYTES = 16; // an Interceptor hook's jump may cover this much of a function's start
const NEAR_JUMP = 5; // jmp rel32
const ENDBR64 = 0xfa1e0ff3; // f3 0f 1e fa, read little-endian
const MAX_DECODED = 4096; // instructions of the current line looked at for calls

class Step {
  readonly stops = new Set<string>();
  readonly entries = new Set<string>(); // trapped function entries (a step into's)
  readonly callSites = new Map<string, Instruction>(); // indirect calls of the current line (a step into's)
  readonly trapped: NativePointer[] = [];
  readonly listeners: InvocationListener[] = [];
  readonly returnTo: string | null;
  readonly frameSp: UInt64;
  readonly skipped: string[] = []; // stops inside a hook's relocated code: never reached at their address
  done = false;

  constructor(readonly tid: number, readonly plan: StepPlan, sp: NativePointer, returnTo: NativePointer | null) {
    this.returnTo = returnTo === null ? null : returnTo.toString();
    this.frameSp = uint64(sp.toString());
  }

  inFrame(sp: NativePointer): boolean {
    const compared = uint64(sp.toString()).compare(this.frameSp);
    return this.plan.fromEntry ? compared < 0 : compared >= 0;
  }

  returned(sp: NativePointer): boolean {
    return uint64(sp.toString()).compare(this.frameSp) > 0;
  }
}

function inRanges(address: NativePointer, ranges: [string, string][]): boolean {
  return ranges.some(([low, high]) => address.compare(ptr(low)) >= 0 && address.compare(ptr(high)) < 0);
}

// The target of the call instruction `call`, with the registers of the thread about to run it.
function callTarget(call: Instruction, context: X64CpuContext, sp: NativePointer): NativePointer | null {
  const operand = (call as X86Instruction).operands[0];
  const registers = context as unknown as Record<string, NativePointer>;
  const value = (name: string): NativePointer => (name === "rsp" ? sp : registers[name]);
  if (operand.type === "imm") {
    return ptr(operand.value.toString());
  }
  if (operand.type === "reg") {
    return value(operand.value) ?? null;
  }
  if (operand.type === "mem") {
    const { base, index, scale, disp } = operand.value;
    let address = ptr(0);
    if (base !== undefined) {
      address = address.add(base === "rip" ? call.next : value(base));
    }
    if (index !== undefined) {
      address = address.add(uint64(value(index).toString()).toNumber() * scale);
    }
    try {
      return address.add(disp).readPointer();
    } catch {
      return null;
    }
  }
  return null;
}

export class Stepper {
  private readonly active = new Map<number, Step>();

  constructor(private readonly traps: Traps, private readonly pause: Pause) {}

  stepping(tid: number): boolean {
    return this.active.has(tid);
  }

  // The paused thread `tid` (its registers `context`, its stack pointer `sp`; at `pc`) goes on under `plan`.
  begin(tid: number, plan: StepPlan, context: X64CpuContext, pc: NativePointer, sp: NativePointer): void {
    this.cancel(tid);
    const step = new Step(tid, plan, sp, this.returnAddress(plan));
    this.active.set(tid, step);
    try {
      if (plan.kind !== "out") {
        const covered = this.hookCovers(plan);
        const stops = plan.stops.map((s) => ptr(s));
        for (const stop of stops) {
          if (covered !== null && stop.compare(covered[0]) >= 0 && stop.compare(covered[1]) < 0) {
            step.skipped.push(stop.toString());
          } else {
            this.trap(step, stop);
            step.stops.add(stop.toString());
          }
        }
        // A line whose first instructions run in the hook's copy: the first of its own that runs where it was built
        // (the hook's jump back lands there) stands for it, when the function goes on past it.
        if (covered !== null && step.skipped.length > 0 && !step.stops.has(covered[1].toString())
            && stops.some((stop) => stop.compare(covered[1]) > 0)) {
          this.trap(step, covered[1]);
          step.stops.add(covered[1].toString());
        }
      }
      if (step.returnTo !== null) {
        this.trap(step, ptr(step.returnTo));
      }
      if (plan.kind === "into") {
        this.trapCalls(step, context, pc, sp);
      }
    } catch (e) {
      this.cancel(tid);
      throw e;
    }
  }

  // Where the paused frame returns to: the address its stack holds, unless that is a stub's (a call a trap's stub
  // ran returns there: the stub jumps on after the original call) or Frida's (a hook's leave trampoline: then the
  // unwinder's address, which Frida translates).
  private returnAddress(plan: StepPlan): NativePointer | null {
    if (plan.returnTo === undefined) {
      return null;
    }
    const held = ptr(plan.returnTo);
    const inStub = this.traps.returnPoint(held);
    if (inStub !== null) {
      return inStub;
    }
    if (Process.findModuleByAddress(held) === null && plan.unwoundReturn !== undefined) {
      return this.traps.returnPoint(ptr(plan.unwoundReturn)) ?? ptr(plan.unwoundReturn);
    }
    return held;
  }

  // The thread's step ends without a stop of its own (a breakpoint stopped it, or it is resumed otherwise).
  cancel(tid: number): void {
    const step = this.active.get(tid);
    if (step === undefined) {
      return;
    }
    this.active.delete(tid);
    step.done = true;
    for (const at of step.trapped) {
      this.traps.disarm(at);
    }
    if (step.listeners.length > 0) {
      // Not from inside one of their own callbacks: later, when the script is free.
      const listeners = step.listeners.splice(0);
      setTimeout(() => {
        listeners.forEach((l) => l.detach());
        Interceptor.flush();
      }, 0);
    }
  }

  // A trap was hit at `at`: true when it ended this thread's step (the thread paused there and was resumed).
  onTrap(context: X64CpuContext, tid: number, at: NativePointer, sp: NativePointer): boolean {
    const step = this.active.get(tid);
    if (step === undefined) {
      return false;
    }
    const key = at.toString();
    const call = step.callSites.get(key);
    if (call !== undefined && step.inFrame(sp)) {
      this.enterTarget(step, callTarget(call, context, sp));
    }
    const ended = (step.stops.has(key) && step.inFrame(sp))
      || (key === step.returnTo && step.returned(sp))
      || step.entries.has(key);
    if (!ended) {
      return false;
    }
    this.cancel(tid);
    this.pause(context, tid, at, sp, step.plan.kind, step.entries.has(key), step.skipped);
    return true;
  }

  private trap(step: Step, at: NativePointer): void {
    this.traps.arm(at);
    step.trapped.push(at);
  }

  // A step into: the current line's calls. A direct one's target is trapped now; an indirect one's when the
  // thread reaches it (or now, when it is the instruction the thread is paused at).
  private trapCalls(step: Step, context: X64CpuContext, pc: NativePointer, sp: NativePointer): void {
    let decoded = 0;
    for (const [low, high] of step.plan.callRanges) {
      let at = ptr(low);
      const end = ptr(high);
      while (at.compare(end) < 0 && decoded < MAX_DECODED) {
        const instruction = Instruction.parse(at);
        decoded += 1;
        if (instruction.mnemonic === "call") {
          const operand = (instruction as X86Instruction).operands[0];
          if (operand.type === "imm") {
            this.enterTarget(step, ptr(operand.value.toString()));
          } else if (at.equals(pc)) {
            this.enterTarget(step, callTarget(instruction, context, sp));
          } else {
            step.callSites.set(at.toString(), instruction);
            this.trap(step, at);
          }
        }
        at = instruction.next;
      }
    }
  }

  // Stop at `target`'s first instruction if it has line information: an int3, or (where Interceptor hooked the
  // function, or another trap sits in its first bytes) a listener of its own.
  private enterTarget(step: Step, target: NativePointer | null): void {
    if (target === null || !inRanges(target, step.plan.intoRanges) || step.entries.has(target.toString())) {
      return;
    }
    step.entries.add(target.toString());
    if (!this.hooked(target)) {
      this.trap(step, target);
      return;
    }
    const stepper = this;
    yieldTo(target);
    step.listeners.push(Interceptor.attach(target, {
      onEnter() {
        if (step.done || this.threadId !== step.tid) {
          return;
        }
        stepper.cancel(step.tid);
        const context = this.context as X64CpuContext;
        stepper.pause(context, this.threadId, target, context.rsp, step.plan.kind, true, step.skipped);
      },
    }));
    Interceptor.flush();
  }

  // The bytes of the paused function an Interceptor hook's jump replaced, when it is hooked (a trace, a function
  // breakpoint): their instructions run from the hook's relocated copy, never at their own addresses. Frida writes
  // a 5-byte jump when its trampoline is near, else a longer one, over whole instructions: the function's
  // instructions as built (entryCode) are decoded in a scratch copy to know where they end. Which jump Frida wrote is
  // read from the function's first byte; the far one is taken to cover 16 bytes (the most it may).
  private hookCovers(plan: StepPlan): [NativePointer, NativePointer] | null {
    if (plan.entry === undefined || plan.entryCode === undefined || !this.hooked(ptr(plan.entry))) {
      return null;
    }
    const entry = ptr(plan.entry);
    const code = plan.entryCode.match(/../g)?.map((h) => parseInt(h, 16)) ?? [];
    const scratch = Memory.alloc(Process.pageSize);
    scratch.writeByteArray(code);
    const jump = entry.readU8() === 0xe9 ? NEAR_JUMP : HOOK_BYTES;
    let length = 0;
    try {
      while (length < jump && length < code.length) {
        length += Instruction.parse(scratch.add(length)).size;
      }
    } catch {
      length = HOOK_BYTES; // not decodable: the widest a hook takes
    }
    return [entry, entry.add(Math.max(length, jump))];
  }

  // Whether an Interceptor hook's jump (a trace, a function breakpoint) may be at `target`: its first byte is a
  // jump. A function that really starts with one is taken the same way (a listener works there too).
  private hooked(target: NativePointer): boolean {
    for (let offset = 0; offset < HOOK_BYTES; offset++) {
      if (this.traps.armed(target.add(offset))) {
        return false; // an int3 of ours in its first bytes: Interceptor could not hook it anyway
      }
    }
    const start = target.readU32() === ENDBR64 ? target.add(4) : target; // Interceptor hooks after it
    const first = start.readU8();
    return first === 0xe9 || first === 0xeb || (first === 0xff && (start.add(1).readU8() & 0x38) === 0x20);
  }
}
