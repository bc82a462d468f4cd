// Native function tracing, the `native` runtime (see runtimes.ts): the NativeTracer owns the CModule
// (tracer.c, cmodule.ts), its ring buffer and hooks, drains the ring in batches to the host, applies watches
// and pointer-following plans, and scans for hot functions. Memory shared with the C side is read at the
// offsets of layout.ts. No JavaScript runs per call except where a JavaScript watch or a followed pointer
// asks for it.

import { emit, HookFailure, WatchError } from "../common/protocol.js";
import { registerStackRewriter, stackRewrites } from "../common/stacks.js";
import { FollowFunction, HookTarget, JsWatchSpec, NativeWatchSpec, SamplingConfig } from "../common/requests.js";
import type { RuntimeTracer } from "../runtimes.js";
import { createTracerModules } from "./cmodule.js";
import { registerYield, Stubs, Thunks, writeThunks } from "./fastpath.js";
import { ArgFollower } from "./follow.js";
import {
  COMMITTED_SIZE,
  FSTATE_SAMPLED_OUT,
  FSTATE_SAMPLING,
  FSTATE_SIZE,
  FSTATE_WATCH_MASK,
  MAX_FUNCTIONS,
  MAX_THREADS,
  NAMES_CAPACITY,
  NATIVE_WATCH_ADDRESS,
  NATIVE_WATCH_SIZE,
  NATIVE_WATCH_WIDTH,
  RECORD_SIZE,
  RING_CAPACITY,
  SHARED_COMMITTED,
  SHARED_DROPPED,
  SHARED_FOLLOW_LIMIT,
  SHARED_FSTATE,
  SHARED_HEAD,
  SHARED_HOT,
  SHARED_NAMES,
  SHARED_NAMES_HEAD,
  SHARED_RING,
  SHARED_SAMPLE_EVERY,
  SHARED_SIZE,
  SHARED_TAIL,
  SHARED_THREADS,
  THREAD_NAME_SIZE,
  THREAD_NAME_TEXT,
  THREAD_NAME_TEXT_SIZE,
  THREAD_NAME_TID,
  THREAD_STACK_SIZE,
  WATCH_FOLLOW,
  WATCH_JS,
} from "./layout.js";
import { UnwindHooks } from "./unwinding.js";
import { JsWatches } from "./watches.js";

// How a function is hooked: Frida's trampolines (`listener`), or the fast path (`listener` null: replaced at
// `address` by Interceptor.replaceFast).
interface Hook {
  address: NativePointer;
  listener: InvocationListener | null;
}

// Interceptor.replaceFast patches at least this many bytes of a function's entry, on whole instructions (measured:
// a jump padded with nops up to the first instruction boundary at or past 16), even where a 5-byte jump reaches: a
// smaller function would have its neighbour's first bytes overwritten.
const FAST_PATCH = 16;

function patchFits(address: NativePointer, size: number): boolean {
  let end = 0;
  try {
    while (end < FAST_PATCH) {
      end += Instruction.parse(address.add(end)).size;
    }
  } catch {
    return false;
  }
  return end <= size;
}

// A function on the fast path cannot share its first bytes with another hook: who arms one within this many bytes
// of its entry moves it to the attach path (replaceFast patches 16 bytes and the rest of the instruction there).
const PATCHED_BYTES = 24;

const EAGER_PENDING = RING_CAPACITY / 16;
const LAZY_DRAIN_MS = 100;
const DRAIN_BATCH = 2048; // records per message; larger batches cost more in page faults than they save
const DRAIN_INTERVAL_MS = 5;
const SAMPLING_SCAN_MS = 100;
// Calls per second of one function whose pointer arguments are followed (JavaScript, ~10-30 us a call);
// later calls in the same second show addresses, so following can never take over a hot function.
const FOLLOW_PER_SECOND = 1000;

export class NativeTracer implements RuntimeTracer {
  private readonly shared = Memory.alloc(SHARED_SIZE);
  private readonly ring = Memory.alloc(RING_CAPACITY * RECORD_SIZE);
  private readonly committed = Memory.alloc(RING_CAPACITY * COMMITTED_SIZE);
  private readonly fstate = Memory.alloc(MAX_FUNCTIONS * FSTATE_SIZE);
  private readonly names = Memory.alloc(NAMES_CAPACITY * THREAD_NAME_SIZE);
  private readonly threads = Memory.alloc(MAX_THREADS * THREAD_STACK_SIZE);
  private namesTail = 0;
  private readonly module: CModule; // tracer.c: the attach path, the drain
  private readonly fast: CModule; // fastpath.c
  private readonly drainFn: NativeFunction<number, [number]>;
  private readonly listeners = new Map<number, Hook>();
  private readonly fastAt = new Map<string, number>(); // the fast path's functions: address -> id
  private readonly shadows = Memory.alloc(MAX_THREADS * 8);
  private readonly originals = Memory.alloc(MAX_FUNCTIONS * 8);
  private readonly stubs: Stubs;
  private readonly thunks: Thunks;
  private readonly unwinding: UnwindHooks;
  private readonly unwindersSeen = new Set<string>(); // module paths whose unwinder copies are hooked
  private readonly sampling = new Map<number, boolean>();
  private lastSamplingScan = 0;
  private sampledOut = 0; // as of the last scan, removed hooks included
  private retiredSampledOut = 0;
  private readonly jsWatches = new JsWatches();
  private nativeWatches: NativeWatchSpec[] = [];
  private watchVersion = 0; // of the watches in force, stamped on every batch (the host decodes by it)
  private readonly follower = new ArgFollower();
  private readonly jsHook: NativeCallback<"void", ["uint32", "uint32", "pointer", "uint32"]>;

  constructor() {
    this.shared.writeByteArray(new Array(SHARED_SIZE).fill(0));
    this.names.writeByteArray(new Array(NAMES_CAPACITY * THREAD_NAME_SIZE).fill(0));
    this.committed.writeByteArray(new Array(RING_CAPACITY * COMMITTED_SIZE).fill(0));
    this.shared.add(SHARED_RING).writePointer(this.ring);
    this.shared.add(SHARED_COMMITTED).writePointer(this.committed);
    this.shared.add(SHARED_FSTATE).writePointer(this.fstate);
    this.shared.add(SHARED_NAMES).writePointer(this.names);
    this.shared.add(SHARED_THREADS).writePointer(this.threads);
    this.configureSampling({ hotCallsPerSecond: 100000, sampleEvery: 100 });
    this.shared.add(SHARED_FOLLOW_LIMIT).writeU32(FOLLOW_PER_SECOND);
    const modules = createTracerModules(this.shared);
    this.module = modules.tracer;
    this.fast = modules.fast;
    this.drainFn = new NativeFunction(this.module.drain, "uint32", ["uint32"]);
    const watches = this.jsWatches;
    const follower = this.follower;
    this.jsHook = new NativeCallback(
      (func: number, seq: number, record: NativePointer, mask: number) => {
        if ((mask & WATCH_JS) !== 0) {
          watches.onRecord(func, seq);
        }
        if ((mask & WATCH_FOLLOW) !== 0) {
          follower.onRecord(func, seq, record);
        }
      },
      "void",
      ["uint32", "uint32", "pointer", "uint32"],
    );
    new NativeFunction(this.module.js_hook_slot, "pointer", [])().writePointer(this.jsHook);
    this.shadows.writeByteArray(new Array(MAX_THREADS * 8).fill(0));
    this.thunks = writeThunks(this.fast.fast_enter, this.fast.fast_exit, this.fast.shadow_unwinding);
    const thunks = this.thunks;
    this.stubs = new Stubs(thunks.enter);
    new NativeFunction(this.fast.fast_config, "void", ["pointer", "pointer", "uint64"])(
      this.shadows, this.originals, uint64(thunks.ret.toString()));
    const restore = new NativeFunction(this.fast.shadow_restore, "void", []);
    const rehook = new NativeFunction(this.fast.shadow_rehook, "void", ["pointer"]);
    this.unwinding = new UnwindHooks(thunks.unwind, (sp) => rehook(sp));
    // libgcc_s may come later (glibc loads it for backtrace() and pthread_cancel): its unwinder then, too.
    Process.attachModuleObserver({
      onAdded: (module) => {
        if (this.fastAt.size > 0 && /^libgcc_s\.so|^libstdc\+\+\.so/.test(module.name)) {
          this.unwinding.install(module);
        }
      },
    });
    registerStackRewriter(() => restore(), (sp) => rehook(sp));
    registerYield((at) => this.yieldAt(at));
  }

  // Hook `target` through the fast path where it may be (fastpath.ts), else with Frida's trampolines.
  private hook(target: HookTarget, fastPath: boolean): Hook {
    const address = ptr(target.address);
    if (fastPath && stackRewrites.allowed && patchFits(address, target.size)) {
      const module = Process.findModuleByAddress(address);
      if (module !== null && !this.unwindersSeen.has(module.path)) {
        this.unwindersSeen.add(module.path);
        this.unwinding.install(module);
      }
      try {
        const original = Interceptor.replaceFast(address, this.stubs.get(target.id, address));
        this.originals.add(target.id * 8).writePointer(original);
        this.fastAt.set(address.toString(), target.id);
        return { address, listener: null };
      } catch {
        // already hooked by someone else (a breakpoint's listener): Frida's trampolines share it
      }
    }
    return { address, listener: this.attach(address, target.id) };
  }

  private attach(address: NativePointer, id: number): InvocationListener {
    return Interceptor.attach(address, { onEnter: this.module.on_enter, onLeave: this.module.on_leave }, ptr(id));
  }

  private unhook(hook: Hook): void {
    if (hook.listener !== null) {
      hook.listener.detach();
    } else {
      Interceptor.revert(hook.address);
      this.fastAt.delete(hook.address.toString());
    }
  }

  // Another hook or a trap is about to go at `at`: a fast-path function whose first bytes hold it moves to Frida's
  // trampolines (calls in flight finish through the return thunk as usual).
  private yieldAt(at: NativePointer): void {
    for (let back = 0; back < PATCHED_BYTES; back++) {
      const start = at.sub(back);
      const id = this.fastAt.get(start.toString());
      if (id === undefined) {
        continue;
      }
      Interceptor.revert(start);
      this.fastAt.delete(start.toString());
      Interceptor.flush();
      this.listeners.set(id, { address: start, listener: this.attach(start, id) });
      Interceptor.flush();
    }
  }

  // Replace the watches. Records made under the old ones leave first, and every later batch carries
  // `version`, so the host decodes each batch with the watches it was recorded under whatever the order in
  // which it reads this reply and the batches. Returns the JavaScript watches refused (expressions that fail
  // to compile).
  setWatches(native: NativeWatchSpec[], js: JsWatchSpec[], version: number): WatchError[] {
    for (const id of this.listeners.keys()) {
      this.fstate.add(id * FSTATE_SIZE + FSTATE_WATCH_MASK).writeU32(0);
    }
    this.flush();
    const slots = new NativeFunction(this.module.watch_config, "pointer", [])();
    for (const watch of native) {
      const slot = slots.add(watch.slot * NATIVE_WATCH_SIZE);
      slot.add(NATIVE_WATCH_ADDRESS).writeU64(uint64(watch.address));
      slot.add(NATIVE_WATCH_WIDTH).writeU32(watch.size);
    }
    this.nativeWatches = native;
    this.watchVersion = version;
    const errors = this.jsWatches.configure(js);
    for (const id of this.listeners.keys()) {
      this.applyWatchMask(id);
    }
    return errors;
  }

  // Add or replace the pointer-following plans of some functions. Records made under the old plans leave first.
  setFollow(funcs: FollowFunction[]): void {
    this.flush();
    this.follower.configure(funcs);
    for (const f of funcs) {
      if (this.listeners.has(f.id)) {
        this.applyWatchMask(f.id);
      }
    }
  }

  get watchCount(): number {
    return this.nativeWatches.length + this.jsWatches.count;
  }

  private applyWatchMask(id: number): void {
    let mask = 0;
    for (const watch of this.nativeWatches) {
      if (watch.funcs === null || watch.funcs.includes(id)) {
        mask |= 1 << watch.slot;
      }
    }
    if (this.jsWatches.appliesTo(id)) {
      mask |= WATCH_JS;
    }
    mask |= this.follower.mask(id);
    this.fstate.add(id * FSTATE_SIZE + FSTATE_WATCH_MASK).writeU32(mask);
  }

  get activeCount(): number {
    return this.listeners.size;
  }

  configureSampling(config: SamplingConfig): void {
    this.shared.add(SHARED_HOT).writeU32(Math.max(1, config.hotCallsPerSecond));
    this.shared.add(SHARED_SAMPLE_EVERY).writeU32(Math.max(1, config.sampleEvery));
  }

  add(targets: HookTarget[], fastPath: boolean): HookFailure[] {
    const failed: HookFailure[] = [];
    for (const target of targets) {
      if (this.listeners.has(target.id)) {
        continue;
      }
      if (target.id < 0 || target.id >= MAX_FUNCTIONS) {
        failed.push({ id: target.id, error: `function id out of range (max ${MAX_FUNCTIONS})` });
        continue;
      }
      this.fstate.add(target.id * FSTATE_SIZE).writeByteArray(new Array(FSTATE_SIZE).fill(0));
      this.applyWatchMask(target.id);
      try {
        this.listeners.set(target.id, this.hook(target, fastPath));
      } catch (e) {
        failed.push({ id: target.id, error: String(e) });
      }
    }
    Interceptor.flush();
    return failed;
  }

  remove(targets: HookTarget[]): HookFailure[] {
    for (const target of targets) {
      const hook = this.listeners.get(target.id);
      if (hook !== undefined) {
        this.unhook(hook);
        this.retiredSampledOut += this.fstate.add(target.id * FSTATE_SIZE + FSTATE_SAMPLED_OUT).readU32();
        this.listeners.delete(target.id);
        this.sampling.delete(target.id);
      }
    }
    Interceptor.flush();
    return [];
  }

  // The periodic drain sends a batch once the ring holds EAGER_PENDING records, and otherwise when its oldest
  // record has waited LAZY_DRAIN_MS (a query asks for a flush anyway). Sending rarely right after a call
  // matters: Frida can miss a child forked while one of our messages is in flight (see forks.ts), and programs
  // typically fork right after some traced call.
  start(): void {
    const tick = (): void => {
      const pending = (this.shared.add(SHARED_HEAD).readU32() - this.shared.add(SHARED_TAIL).readU32()) >>> 0;
      const now = Date.now();
      if (pending === 0) {
        this.pendingSince = 0;
      } else if (this.pendingSince === 0) {
        this.pendingSince = now;
      }
      if (pending >= EAGER_PENDING || (pending > 0 && now - this.pendingSince >= LAZY_DRAIN_MS)) {
        this.flush();
        this.pendingSince = 0;
      }
      setTimeout(tick, DRAIN_INTERVAL_MS);
    };
    setTimeout(tick, DRAIN_INTERVAL_MS);
  }

  private pendingSince = 0; // Date.now() when the drain first saw records waiting; 0 when none

  // `final`: the process is exiting; bring the sampling counters up to date before the last batch.
  flush(final = false): void {
    if (final) {
      this.scanSampling();
    }
    // Records go out straight from the ring (send() copies them), one contiguous run at a time; the tail
    // moves past them only once they are sent. Bounded, so a producer faster than the host cannot keep
    // this loop running forever.
    for (let round = 0; round < RING_CAPACITY / DRAIN_BATCH + 1; round++) {
      const firstSeq = this.shared.add(SHARED_TAIL).readU32();
      const n = this.drainFn(DRAIN_BATCH);
      if (n === 0) {
        break;
      }
      const slot = firstSeq & (RING_CAPACITY - 1);
      emit(
        {
          type: "trace_batch",
          count: n,
          firstSeq,
          dropped: this.shared.add(SHARED_DROPPED).readS32(),
          sampledOut: this.sampledOut,
          threads: this.newThreadNames(),
          watchVersion: this.watchVersion,
          watchValues: this.jsWatches.count > 0 ? this.jsWatches.take(firstSeq, n) : undefined,
          followValues: this.follower.active ? this.follower.take(firstSeq, n) : undefined,
        },
        ArrayBuffer.wrap(this.ring.add(slot * RECORD_SIZE), n * RECORD_SIZE),
      );
      this.shared.add(SHARED_TAIL).writeU32((firstSeq + n) >>> 0);
      if (n < DRAIN_BATCH && slot + n !== RING_CAPACITY) {
        break;
      }
    }
    if (final) {
      // The loss counters may have moved since the last batch: an empty batch carries their last values.
      emit({
        type: "trace_batch",
        count: 0,
        firstSeq: this.shared.add(SHARED_TAIL).readU32(),
        dropped: this.shared.add(SHARED_DROPPED).readS32(),
        sampledOut: this.sampledOut,
        threads: this.newThreadNames(),
        watchVersion: this.watchVersion,
      });
    }
    const now = Date.now();
    if (now - this.lastSamplingScan >= SAMPLING_SCAN_MS) {
      this.lastSamplingScan = now;
      this.scanSampling();
    }
  }

  // Names noted by the C side since the last batch; sent before any record of those threads is stored.
  private newThreadNames(): [number, string][] {
    const head = this.shared.add(SHARED_NAMES_HEAD).readU32();
    const out: [number, string][] = [];
    if (head - this.namesTail > NAMES_CAPACITY) {
      this.namesTail = head - NAMES_CAPACITY;
    }
    for (; this.namesTail !== head; this.namesTail = (this.namesTail + 1) >>> 0) {
      const entry = this.names.add((this.namesTail & (NAMES_CAPACITY - 1)) * THREAD_NAME_SIZE);
      const tid = entry.add(THREAD_NAME_TID).readU32();
      if (tid !== 0) {
        const text = entry.add(THREAD_NAME_TEXT);
        const raw = new Uint8Array(text.readByteArray(THREAD_NAME_TEXT_SIZE) ?? new ArrayBuffer(0));
        const end = raw.indexOf(0);
        out.push([tid, text.readUtf8String(end < 0 ? raw.length : end) ?? ""]);
      }
    }
    return out;
  }

  private scanSampling(): void {
    const every = this.shared.add(SHARED_SAMPLE_EVERY).readU32();
    let sampledOut = this.retiredSampledOut;
    for (const id of this.listeners.keys()) {
      const state = this.fstate.add(id * FSTATE_SIZE);
      sampledOut += state.add(FSTATE_SAMPLED_OUT).readU32();
      const enabled = state.add(FSTATE_SAMPLING).readU32() !== 0;
      if (enabled !== (this.sampling.get(id) ?? false)) {
        this.sampling.set(id, enabled);
        emit({
          type: "sampling_state_change",
          funcId: id,
          enabled,
          sampleRate: 1 / every,
          sampledOut: state.add(FSTATE_SAMPLED_OUT).readU32(),
        });
      }
    }
    this.sampledOut = sampledOut;
  }
}
