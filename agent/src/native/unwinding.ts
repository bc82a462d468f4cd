// The fast path's return addresses and libgcc's unwinder (see fastpath.ts). Before the unwinder walks a thread's
// stack for an exception (C++, a Rust panic, pthread_exit's forced unwind) or a backtrace, that thread's real
// return addresses go back on its stack (fastpath.c's shadow_unwinding, called by the unwind thunk); the frames
// still alive afterwards return through the thunk again: where a C++ exception is caught (__cxa_begin_catch: the
// frames below it were unwound), and after a backtrace at the thread's next traced call or return.
//
// The unwinder's entry points are replaced (Interceptor.replaceFast), not attached to: an attach listener's
// trampoline stands between the unwinder and its caller, and libgcc starts unwinding from its own frame (measured:
// a C++ throw ended in std::terminate, backtrace() found no frame). Every copy is hooked: the exported ones
// (libgcc_s, also when it is loaded later) and a module's own (a statically linked unwinder).
//
// Not rehooked: frames above a caught Rust panic (catch_unwind has no exported catch point) return directly, so
// their calls keep no exit event; an exception thrown and caught inside a destructor while another one unwinds
// rehooks the outer one's frames early (libgcc then stops at the thunk: the program terminates).

const EXCEPTION = 1; // shadow_unwinding's kinds
const BACKTRACE = 2;
const UNWINDERS: [string, number][] = [
  ["_Unwind_RaiseException", EXCEPTION],
  ["_Unwind_Resume_or_Rethrow", EXCEPTION],
  ["_Unwind_ForcedUnwind", EXCEPTION],
  ["_Unwind_Backtrace", BACKTRACE],
];
const CATCH = "__cxa_begin_catch";
const STUB_SIZE = 48;

export class UnwindHooks {
  private readonly hooked = new Set<string>(); // addresses
  private readonly kept: NativePointer[] = []; // stubs and cells: the garbage collector would free them

  constructor(private readonly thunk: NativePointer, private readonly rehook: (sp: NativePointer) => void) {}

  // Hook the exported copies, and `module`'s own when it has any.
  install(module: Module | null): void {
    for (const [name, kind] of UNWINDERS) {
      this.replace(Module.findGlobalExportByName(name), kind);
      if (module !== null) {
        this.replace(module.findExportByName(name) ?? module.findSymbolByName(name), kind);
      }
    }
    for (const at of [Module.findGlobalExportByName(CATCH), module?.findSymbolByName(CATCH) ?? null]) {
      if (at !== null && !this.hooked.has(at.toString())) {
        this.hooked.add(at.toString());
        const rehook = this.rehook;
        Interceptor.attach(at, { onEnter() { rehook(this.context.sp); } });
      }
    }
  }

  // `at` jumps to a stub near it: `mov r11, cell; mov r10, kind; jmp thunk`; the cell holds the original's entry.
  private replace(at: NativePointer | null, kind: number): void {
    if (at === null || this.hooked.has(at.toString())) {
      return;
    }
    this.hooked.add(at.toString());
    const cell = Memory.alloc(Process.pointerSize);
    const stub = Memory.alloc(Process.pageSize, { near: at, maxDistance: 0x7ff00000 });
    this.kept.push(cell, stub);
    Memory.patchCode(stub, STUB_SIZE, (code) => {
      const w = new X86Writer(code, { pc: stub });
      w.putMovRegAddress("r11", cell);
      w.putMovRegU64("r10", kind);
      w.putJmpAddress(this.thunk);
      w.flush();
    });
    cell.writePointer(Interceptor.replaceFast(at, stub));
  }
}
