// What the native tracer's fast path (native/fastpath.ts) changes on a thread's stack, for the modules that read
// stacks or let go of the process: a traced call's return address is replaced by the fast path's return thunk
// while the call runs. An unwinder stops there (the thunk has no unwind information), so a thread's real return
// addresses are put back while its stack is walked (withTrueStack); and a process Strobe attached to, which it may
// leave running, never gets the fast path (`stackRewrites.allowed`).

interface Rewriter {
  restore: () => void; // the calling thread's real return addresses back on its stack
  rehook: (sp: NativePointer) => void; // its live frames (above sp) returning through the thunk again
}

let rewriter: Rewriter | null = null;

export const stackRewrites = {
  allowed: true, // false once the agent learns the process was attached to (output.ts): Strobe may detach from it
};

export function registerStackRewriter(restore: () => void, rehook: (sp: NativePointer) => void): void {
  rewriter = { restore, rehook };
}

// Run `walk` (a backtrace, a stack dump) in the thread whose stack it reads, with that thread's real return
// addresses on its stack. `sp`: the thread's stack pointer, below every frame still alive afterwards. `keep`: leave
// them in place (a crash report: the thread may never return through them).
export function withTrueStack<T>(sp: NativePointer, walk: () => T, keep = false): T {
  if (rewriter === null) {
    return walk();
  }
  rewriter.restore();
  try {
    return walk();
  } finally {
    if (!keep) {
      rewriter.rehook(sp);
    }
  }
}
