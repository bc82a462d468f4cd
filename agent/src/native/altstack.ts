// Alternate signal stacks big enough for Frida's signal handler. Frida takes SIGTRAP, SIGSEGV, SIGBUS, SIGILL, SIGFPE,
// SIGABRT and SIGSYS with SA_ONSTACK, so the agent's exception handler (common/crash.ts: a line breakpoint's trap,
// a crash report) runs in JavaScript on the thread's alternate signal stack when it has one. Measured (QuickJS,
// x86-64 whose kernel signal frame with AVX-512 state is 3.3 KiB): a line breakpoint's trap uses 11.0 KiB of that
// stack, the same after 50,000 hits; a crash report 12.8 KiB. Rust's std gives every thread it runs, main included,
// an 8 KiB one (SIGSTKSZ, or AT_MINSIGSTKSZ when larger; mapped above a guard page) for its stack-overflow message:
// the handler ran into the guard page and the program died of SIGSEGV at its first line breakpoint. CPython's
// faulthandler installs 16.5 KiB.
//
// So sigaltstack() is hooked. A stack smaller than NEEDED that the program installs is replaced, for the kernel, by
// one of SIZE bytes mapped here (a guard page below, untouched pages cost no memory), and the program is still told
// its own: while ours stands in, what sigaltstack() answers in `old_ss` names the program's stack and size (the
// kernel's flags). Rust only reads SS_DISABLE there and unmaps the stack it mapped itself at thread exit; CPython's
// faulthandler compares ss_sp with its own before it restores the previous one. Ours is released when the thread
// installs another stack or disables it (Rust does, as a thread ends), or, when the thread ended with it, once a
// later allocation finds the thread gone (tgkill(pid, tid, 0): ESRCH). Only stacks installed after the agent is
// loaded are replaced: in a launched program that is every one (Rust installs the main thread's in its runtime's
// init, which runs after the agent is in). A forked child that inherited ours keeps it; a copy of this agent in a
// child (common/forks.ts, `unheard`) never recycles the parent's.

import { unheard } from "../common/forks.js";
import { emit } from "../common/protocol.js";

const NEEDED = 64 * 1024; // a program's stack at least this big is left alone: 5 times the measured need
const SIZE = 256 * 1024; // the stack put in place of a smaller one
const KEPT = 16; // released stacks kept for the next threads; beyond, unmapped
const SWEEP_FROM = 64; // stacks in use before an allocation looks for threads that ended with theirs

// struct stack_t (x86_64 and arm64): void *ss_sp; int ss_flags; size_t ss_size.
const STACK_T_SIZE = 24;
const SS_FLAGS = 8;
const SS_SIZE = 16;
const SS_DISABLE = 2;

const PROT_NONE = 0;
const PROT_READ_WRITE = 3;
const MAP_PRIVATE_ANONYMOUS = 0x22;
const MAP_NORESERVE = 0x4000;
const MAP_STACK = 0x20000;
const ESRCH = 3;

interface Substitute {
  base: NativePointer; // the stack's lowest address; its guard page is the page below
  tid: number; // the thread it was installed for
  programSp: NativePointer; // what the program installed, and is told it has
  programSize: UInt64;
}

interface Call {
  wanted: NativePointer; // the program's ss (null: a query)
  told: NativePointer; // the program's old_ss (null: not asked)
  previous: NativePointer; // where the kernel writes the previous stack: old_ss, or ours when it is null
  replacement: NativePointer | null; // our ss, when the program's stack is replaced
  substitute: Substitute | null;
}

class AltStacks {
  private readonly inUse = new Map<string, Substitute>(); // by base
  private readonly free: NativePointer[] = [];
  private sweepFrom = SWEEP_FROM;
  private announced = false;
  private readonly page = Process.pageSize;
  private readonly mmap = new NativeFunction(Module.getGlobalExportByName("mmap"), "pointer",
                                             ["pointer", "size_t", "int", "int", "int", "long"]);
  private readonly mprotect = new NativeFunction(Module.getGlobalExportByName("mprotect"), "int",
                                                 ["pointer", "size_t", "int"]);
  private readonly munmap = new NativeFunction(Module.getGlobalExportByName("munmap"), "int", ["pointer", "size_t"]);
  private readonly tgkill = AltStacks.tgkill();

  private static tgkill(): SystemFunction<number, [number, number, number]> | null {
    const address = Module.findGlobalExportByName("tgkill");
    return address === null ? null : new SystemFunction(address, "int", ["int", "int", "int"]);
  }

  enter(args: InvocationArguments, tid: number): Call {
    const call: Call = { wanted: args[0], told: args[1], previous: args[1], replacement: null, substitute: null };
    if (call.told.isNull()) {
      call.previous = Memory.alloc(STACK_T_SIZE);
      args[1] = call.previous;
    }
    const wanted = call.wanted;
    if (wanted.isNull() || (wanted.add(SS_FLAGS).readS32() & SS_DISABLE) !== 0) {
      return call;
    }
    const size = wanted.add(SS_SIZE).readU64();
    if (size.compare(NEEDED) >= 0) {
      return call;
    }
    const base = this.take();
    if (base === null) {
      return call; // no memory: the program's own stack, as without Strobe
    }
    call.substitute = { base, tid, programSp: wanted.readPointer(), programSize: size };
    call.replacement = Memory.alloc(STACK_T_SIZE);
    call.replacement.writePointer(base);
    call.replacement.add(SS_FLAGS).writeS32(wanted.add(SS_FLAGS).readS32());
    call.replacement.add(SS_SIZE).writeU64(SIZE);
    args[0] = call.replacement;
    return call;
  }

  leave(call: Call, result: number): void {
    if (result !== 0) {
      if (call.substitute !== null) {
        this.release(call.substitute.base); // refused (EPERM: on the stack now; ENOMEM): never installed
      }
      return;
    }
    const before = this.inUse.get(call.previous.readPointer().toString());
    if (before !== undefined && !call.wanted.isNull()) {
      this.inUse.delete(before.base.toString()); // replaced or disabled: the thread is not on it (else EPERM)
      this.release(before.base);
    }
    const installed = call.substitute;
    if (installed !== null) {
      this.inUse.set(installed.base.toString(), installed);
      if (!this.announced) {
        this.announced = true;
        emit({ type: "log", level: "info", message: `an alternate signal stack of ${installed.programSize} bytes `
              + `(and each later one under ${NEEDED}) is replaced by one of ${SIZE}: Frida's exception handler needs more` });
      }
    }
    if (before !== undefined && !call.told.isNull()) {
      call.told.writePointer(before.programSp); // the program's view: its own stack (the kernel's flags)
      call.told.add(SS_SIZE).writeU64(before.programSize);
    }
  }

  private take(): NativePointer | null {
    if (this.inUse.size >= this.sweepFrom) {
      this.sweep();
    }
    const kept = this.free.pop();
    if (kept !== undefined) {
      return kept;
    }
    const mapped = this.mmap(NULL, SIZE + this.page, PROT_READ_WRITE, MAP_PRIVATE_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
                             -1, 0);
    if (mapped.equals(ptr(-1))) {
      return null;
    }
    this.mprotect(mapped, this.page, PROT_NONE);
    return mapped.add(this.page);
  }

  private release(base: NativePointer): void {
    if (this.free.length < KEPT) {
      this.free.push(base);
    } else {
      this.munmap(base.sub(this.page), SIZE + this.page);
    }
  }

  // Stacks of threads that ended without disabling theirs (a C program need not) are free again.
  private sweep(): void {
    if (this.tgkill !== null && !unheard()) {
      for (const [key, used] of this.inUse) {
        const sent = this.tgkill(Process.id, used.tid, 0) as UnixSystemFunctionResult<number>;
        if (sent.value === -1 && sent.errno === ESRCH) {
          this.inUse.delete(key);
          this.release(used.base);
        }
      }
    }
    this.sweepFrom = Math.max(SWEEP_FROM, this.inUse.size * 2);
  }
}

// Hooks libc's sigaltstack() (a program without libc has no stack to replace).
export function installAltStacks(): void {
  const target = Module.findGlobalExportByName("sigaltstack");
  if (target === null) {
    return;
  }
  const stacks = new AltStacks();
  Interceptor.attach(target, {
    onEnter(args) {
      try {
        this.call = stacks.enter(args, this.threadId);
      } catch (e) {
        this.call = null;
        emit({ type: "log", level: "warning", message: `sigaltstack: the program's stack is kept: ${e}` });
      }
    },
    onLeave(retval) {
      if (this.call !== null) {
        stacks.leave(this.call as Call, retval.toInt32());
      }
    },
  });
}
