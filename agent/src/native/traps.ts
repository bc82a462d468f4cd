// One-byte int3 traps on code addresses, for line breakpoints and for steps (a line's first instruction may be
// too short for an Interceptor hook's jump, or a jump's target). The trap's SIGTRAP, which crash.ts's exception
// handler hands here first, only sends the thread on to the address's stub:
//   lea rsp, [rsp-144]    past the red zone (the 128 bytes below the stack pointer a leaf function keeps its
//                         locals in: the hook's frame would overwrite them; lea leaves the flags alone)
//   <16-byte landing>     hooked with Interceptor
//   lea rsp, [rsp+144]
//   <the instruction the int3 covers, relocated (X86Relocator rewrites RIP-relative operands)>
//   jmp <the next instruction>
// so the int3 stays armed for every thread. The landing's hook calls the handler on the thread's own stack (a
// signal handler may run on a small alternate stack, too small for JavaScript), with the context's pc set to the
// int3's address while it runs.
//
// A hook attached from inside another hook's callback (a step arming its stops from the paused thread's) only
// takes effect later (measured: a thread ran through the new stub unhooked). Until the landing shows the hook's
// jump, a thread that traps there is sent back to the int3, to trap again.
//
// Several users may want a trap at one address (a breakpoint, a step's stops): the int3 is written by the first
// and removed with the last. A stub, once made, is kept for the address (a thread may still be in it; a later
// trap there reuses it), so arming the same lines again and again costs no memory.

// `sp`: the thread's stack pointer at the int3 (the context's is the stub's, past the red zone).
import { yieldTo } from "./fastpath.js";

export type TrapHandler = (context: X64CpuContext, tid: number, at: NativePointer, sp: NativePointer) => void;

interface Stub {
  code: NativePointer; // where the trap sends the thread
  next: NativePointer; // the instruction after the covered one
  landing: NativePointer; // the hooked part
  hooked: boolean; // the landing's hook is in place
  original: number; // the byte the int3 replaces
  users: number; // 0: the int3 is not there
}

const INT3 = 0xcc;
const RED_ZONE = 128;
const SKIPPED = RED_ZONE + 16; // and a slot more: the hook writes its leave address at the landing's [rsp] (measured)
const LANDING = 16; // room for the hook's jump
const STUB_SIZE = 96; // two leas, the landing, one relocated instruction (RIP-relative ones grow: ~30 bytes), a jump

export class Traps {
  private readonly stubs = new Map<string, Stub>(); // by the trap's address
  private copies: NativePointer | null = null; // the page stubs are written to
  private copiesUsed = 0;

  constructor(private readonly handler: TrapHandler) {}

  armed(at: NativePointer): boolean {
    return (this.stubs.get(at.toString())?.users ?? 0) > 0;
  }

  // One more user of a trap at `at`; throws when there is code there Strobe cannot trap.
  arm(at: NativePointer): void {
    const key = at.toString();
    let stub = this.stubs.get(key);
    if (stub === undefined) {
      yieldTo(at); // a traced function on the fast path whose first bytes hold `at` moves to Frida's trampolines
      const original = at.readU8();
      if (original === INT3) {
        throw new Error("the instruction there is already an int3 (another debugger's, or the program's own)");
      }
      const [code, landing, next] = this.relocate(at);
      const handler = this.handler;
      Interceptor.attach(landing, {
        onEnter() {
          const context = this.context as X64CpuContext;
          const pc = context.pc;
          context.pc = at; // for the unwinder (its stack pointer must stay the stub's: measured, Frida's unwinder
          try { //            takes a wrong first frame from the one the thread had at the int3)
            handler(context, this.threadId, at, context.rsp.add(SKIPPED));
          } finally {
            context.pc = pc;
          }
        },
      });
      Interceptor.flush();
      stub = { code, next, landing, hooked: false, original, users: 0 };
      this.stubs.set(key, stub);
    }
    if (stub.users === 0) {
      Memory.patchCode(at, 1, (c) => c.writeU8(INT3));
    }
    stub.users += 1;
  }

  // One user fewer; the last one puts the original byte back (a thread already sent to the stub runs the
  // relocated instruction and goes back as usual).
  disarm(at: NativePointer): void {
    const stub = this.stubs.get(at.toString());
    if (stub === undefined || stub.users === 0) {
      return;
    }
    stub.users -= 1;
    if (stub.users === 0) {
      const original = stub.original;
      Memory.patchCode(at, 1, (code) => code.writeU8(original));
    }
  }

  // The stub of `at` (see the header) and its landing.
  private relocate(at: NativePointer): [NativePointer, NativePointer, NativePointer] {
    if (this.copies === null || this.copiesUsed + STUB_SIZE > Process.pageSize) {
      this.copies = Memory.alloc(Process.pageSize);
      this.copiesUsed = 0;
    }
    const stub = this.copies.add(this.copiesUsed);
    let landing = stub;
    let length = 0;
    Memory.patchCode(stub, STUB_SIZE, (code) => {
      const writer = new X86Writer(code, { pc: stub });
      writer.putLeaRegRegOffset("rsp", "rsp", -SKIPPED);
      landing = stub.add(writer.offset);
      writer.putNopPadding(LANDING);
      writer.putLeaRegRegOffset("rsp", "rsp", SKIPPED);
      const relocator = new X86Relocator(at, writer);
      length = relocator.readOne();
      if (length === 0) {
        throw new Error("the instruction there cannot be relocated");
      }
      relocator.writeOne();
      writer.putJmpAddress(at.add(length));
      writer.flush();
    });
    this.copiesUsed += STUB_SIZE;
    return [stub, landing, at.add(length)];
  }

  // Where a return address that points into a stub goes on: a call the stub ran for its int3 (the relocated copy
  // calls from the stub) returns into the stub, which jumps to the instruction after the original call. Null when
  // `address` is in no stub.
  returnPoint(address: NativePointer): NativePointer | null {
    for (const stub of this.stubs.values()) {
      if (address.compare(stub.code) >= 0 && address.compare(stub.code.add(STUB_SIZE)) < 0) {
        return stub.next;
      }
    }
    return null;
  }

  // A trap of one of these int3s sends its thread to the stub (whose hook does the rest, off the signal's stack).
  // False for any other exception.
  onException(details: ExceptionDetails): boolean {
    if (details.type !== "breakpoint") {
      return false;
    }
    const stub = this.stubs.get(details.context.pc.sub(1).toString()); // the trap leaves the pc after the int3
    if (stub === undefined) {
      return false;
    }
    if (!stub.hooked) {
      const first = stub.landing.readU8();
      stub.hooked = first === 0xe9 || first === 0xff; // the hook's jump (near or far)
      if (!stub.hooked) {
        details.context.pc = details.context.pc.sub(1); // not yet: trap again
        return true;
      }
    }
    details.context.pc = stub.code; // even disarmed meanwhile by another thread: the trap was this one's
    return true;
  }
}
