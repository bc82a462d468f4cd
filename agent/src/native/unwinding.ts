// The fast path's return addresses and the unwinders that walk the stack (see fastpath.ts): before libgcc's
// unwinder walks a thread's stack for an exception (C++, Rust panics, pthread_exit's forced unwind) or a backtrace,
// that thread's real return addresses go back on its stack; frames still alive afterwards return through the thunk
// again: after _Unwind_Backtrace, and where a C++ exception is caught (__cxa_begin_catch: the frames below the catch
// were unwound). Every copy of these functions is hooked: the exported ones (libgcc_s, libstdc++, also when loaded
// later) and a module's own (a statically linked unwinder).
//
// Not rehooked: frames above a caught Rust panic (catch_unwind has no exported catch point) return directly, so
// their calls keep no exit event; an exception thrown and caught inside a destructor while another one unwinds
// rehooks the outer one's frames early (libgcc then stops at the thunk: the program terminates).

const RESTORE_ON_ENTER = ["_Unwind_RaiseException", "_Unwind_Resume_or_Rethrow", "_Unwind_ForcedUnwind"];
const AROUND = ["_Unwind_Backtrace"];
const CATCH = ["__cxa_begin_catch"];

export class UnwindHooks {
  private readonly hooked = new Set<string>(); // addresses

  constructor(private readonly restore: () => void, private readonly rehook: (sp: NativePointer) => void) {}

  // Hook the exported copies, and `module`'s own when it has any.
  install(module: Module | null): void {
    for (const name of [...RESTORE_ON_ENTER, ...AROUND, ...CATCH]) {
      this.hook(name, Module.findGlobalExportByName(name));
      if (module !== null) {
        this.hook(name, module.findSymbolByName(name));
      }
    }
  }

  private hook(name: string, at: NativePointer | null): void {
    if (at === null || this.hooked.has(at.toString())) {
      return;
    }
    this.hooked.add(at.toString());
    const { restore, rehook } = this;
    if (RESTORE_ON_ENTER.includes(name)) {
      Interceptor.attach(at, { onEnter() { restore(); } });
    } else if (AROUND.includes(name)) {
      Interceptor.attach(at, {
        onEnter() {
          this.sp = this.context.sp;
          restore();
        },
        onLeave() {
          rehook(this.sp as NativePointer);
        },
      });
    } else {
      Interceptor.attach(at, { onEnter() { rehook(this.context.sp); } });
    }
  }
}
