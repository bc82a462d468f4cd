// The native tracer's fast path: a traced function is sent by Interceptor.replaceFast to a small stub of ours
// instead of Frida's attach trampolines. The stub loads the function's id and jumps to the enter thunk, which saves
// the argument registers (rdi-r9, rax, r10, xmm0-7), calls fastpath.c's fast_enter (the enter record; the caller's
// return address pushed on the thread's shadow stack and replaced by the return thunk's), restores them and jumps
// into the original (replaceFast's relocated prologue). The function returns into the return thunk, which saves the
// return registers (rax, rdx, xmm0, xmm1), calls fast_exit (the exit record; the real return address popped) and
// jumps there. Measured per traced call: see bench/overhead.py and README.md's performance table.
//
// What a replaced return address means for the rest of the agent, and how it is handled:
// - An unwinder reading the stack stops at the return thunk (it has no unwind information). So before one walks a
//   thread's stack, that thread's real return addresses are put back (fastpath.c's shadow_restore), and afterwards
//   the frames still alive return through the thunk again (shadow_rehook): from libgcc's unwinder entry points
//   (exceptions until __cxa_begin_catch, _Unwind_Backtrace until the thread's next traced call or return:
//   unwinding.ts), and while a thread is held at a breakpoint or reports a crash (common/stacks.ts).
// - A function replaced this way cannot also be attached to by Interceptor (a breakpoint at its entry, a step
//   entering it, a trap in its first bytes): those ask `yieldTo(address)` first, and the tracer moves the function
//   to the attach path (Frida's trampolines, which coexist with other listeners).
// - longjmp and frames abandoned by exceptions: fast_exit matches a return by its stack slot, so calls left on the
//   shadow stack by frames that never returned are dropped there (their calls keep no exit event).
// - A process Strobe attached to keeps Frida's trampolines (stackRewrites.allowed is false): its stacks must hold no
//   address of Strobe's once Strobe detaches.

const ENTER_FRAME = 200; // sizeof (FastFrame) - 8: the return address is the frame's last word (tracer.h)
const RET_FRAME = 48; // sizeof (RetFrame)
const UNWIND_FRAME = 72; // 8 saved registers, and the stack 16-byte aligned for the call
const XMM_AT = 64; // FastFrame.xmm
const FUNC_AT = 192; // FastFrame.func
const GP = ["rdi", "rsi", "rdx", "rcx", "r8", "r9", "rax", "r10"] as const;
const STUB_SIZE = 32;
const STUBS_PER_PAGE = 4096 / STUB_SIZE;

// movups [rsp + at], xmm<n> (store) or movups xmm<n>, [rsp + at] (load), with a 32-bit displacement.
function movups(w: X86Writer, n: number, at: number, store: boolean): void {
  w.putBytes([0x0f, store ? 0x11 : 0x10, 0x84 | (n << 3), 0x24, at & 0xff, (at >> 8) & 0xff, (at >> 16) & 0xff,
              (at >>> 24) & 0xff]);
}

export interface Thunks {
  page: NativePointer; // Memory.alloc's: kept referenced, or the garbage collector frees the page
  enter: NativePointer;
  ret: NativePointer;
  unwind: NativePointer; // r10 = kind, r11 = where the original's address is: shadow_unwinding (kind), then on
}

// The enter, return and unwinder thunks, in one executable page that is never freed (return addresses may point
// into it until the process ends).
export function writeThunks(fastEnter: NativePointer, fastExit: NativePointer, unwinding: NativePointer): Thunks {
  const page = Memory.alloc(Process.pageSize);
  Memory.protect(page, Process.pageSize, "rwx");
  const w = new X86Writer(page);
  const enter = w.code;
  w.putSubRegImm("rsp", ENTER_FRAME);
  GP.forEach((reg, i) => w.putMovRegOffsetPtrReg("rsp", 8 * i, reg));
  for (let n = 0; n < 8; n++) {
    movups(w, n, XMM_AT + 16 * n, true);
  }
  w.putMovRegOffsetPtrReg("rsp", FUNC_AT, "r11");
  w.putMovRegReg("rdi", "rsp");
  w.putCallAddress(fastEnter);
  w.putMovRegReg("r11", "rax");
  for (let n = 0; n < 8; n++) {
    movups(w, n, XMM_AT + 16 * n, false);
  }
  GP.forEach((reg, i) => w.putMovRegRegOffsetPtr(reg, "rsp", 8 * i));
  w.putAddRegImm("rsp", ENTER_FRAME);
  w.putJmpReg("r11");
  w.putBreakpoint(); // never reached
  while (!w.code.and(15).isNull()) {
    w.putNop();
  }
  w.putNop(); // the byte before the thunk: an unwinder looks up the return address minus one
  const ret = w.code;
  w.putSubRegImm("rsp", RET_FRAME);
  movups(w, 0, 0, true);
  movups(w, 1, 16, true);
  w.putMovRegOffsetPtrReg("rsp", 32, "rax");
  w.putMovRegOffsetPtrReg("rsp", 40, "rdx");
  w.putMovRegReg("rdi", "rsp");
  w.putCallAddress(fastExit);
  w.putMovRegReg("r11", "rax");
  movups(w, 0, 0, false);
  movups(w, 1, 16, false);
  w.putMovRegRegOffsetPtr("rax", "rsp", 32);
  w.putMovRegRegOffsetPtr("rdx", "rsp", 40);
  w.putAddRegImm("rsp", RET_FRAME);
  w.putJmpReg("r11");
  while (!w.code.and(15).isNull()) {
    w.putNop();
  }
  const unwind = w.code;
  const saved = ["rdi", "rsi", "rdx", "rcx", "r8", "r9", "rax", "r11"] as const;
  w.putSubRegImm("rsp", UNWIND_FRAME);
  saved.forEach((reg, i) => w.putMovRegOffsetPtrReg("rsp", 8 * i, reg));
  w.putMovRegReg("rdi", "r10");
  w.putCallAddress(unwinding);
  saved.forEach((reg, i) => w.putMovRegRegOffsetPtr(reg, "rsp", 8 * i));
  w.putAddRegImm("rsp", UNWIND_FRAME);
  w.putMovRegRegPtr("r11", "r11");
  w.putJmpReg("r11");
  w.flush();
  Memory.protect(page, Process.pageSize, "r-x");
  return { page, enter, ret, unwind };
}

// Per function id, a stub `mov r11, id; jmp enter`: written once, kept for the process's life. A stub lies within
// ±2 GB of its function, so the function's entry jumps to it directly (a far target takes an indirect jump through
// memory). Whatever the distance, replaceFast patches 16 bytes and more: tracer.ts leaves shorter functions to the
// attach path.
export class Stubs {
  private readonly byId = new Map<number, NativePointer>();
  private readonly pages: { page: NativePointer; used: number }[] = []; // kept referenced: the GC would free them

  constructor(private readonly enter: NativePointer) {}

  get(id: number, near: NativePointer): NativePointer {
    let stub = this.byId.get(id);
    if (stub === undefined) {
      let page = this.pages.find((p) => p.used < STUBS_PER_PAGE && distance(p.page, near) < NEAR_BYTES);
      if (page === undefined) {
        page = { page: Memory.alloc(Process.pageSize, { near, maxDistance: NEAR_BYTES }), used: 0 };
        this.pages.push(page);
      }
      stub = page.page.add(page.used * STUB_SIZE);
      page.used++;
      const at = stub;
      Memory.patchCode(at, STUB_SIZE, (code) => {
        const w = new X86Writer(code, { pc: at });
        w.putMovRegU64("r11", id);
        w.putJmpAddress(this.enter);
        w.flush();
      });
      this.byId.set(id, stub);
    }
    return stub;
  }
}

const NEAR_BYTES = 0x7ff00000; // what a 5-byte jump reaches, with room for the stub's own size

function distance(a: NativePointer, b: NativePointer): number {
  const d = a.compare(b) >= 0 ? a.sub(b) : b.sub(a);
  return d.compare(ptr(NEAR_BYTES)) >= 0 ? NEAR_BYTES : d.toUInt32();
}

// Who else hooks code (breakpoints, steps, traps) asks the tracer to give up the fast path at an address first.
type Yield = (at: NativePointer) => void;
let yielder: Yield | null = null;

export function registerYield(onYield: Yield): void {
  yielder = onYield;
}

// Before an Interceptor listener or a trap goes at or just after `at`: a function there on the fast path moves to
// Frida's trampolines.
export function yieldTo(at: NativePointer): void {
  yielder?.(at);
}
