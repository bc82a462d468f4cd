// Native function tracing on the hot path: Interceptor listeners implemented in C (CModule) write
// fixed-size binary records into one ring buffer with atomic slot reservation; a JS timer drains the
// ring in large batches and sends them to the host as binary messages. No JavaScript runs per call.
//
// Record layout (RECORD_SIZE bytes, little endian), decoded by src/strobe/instrument/records.py:
//   0 u64 timestamp (CLOCK_MONOTONIC ns)   8 u32 thread id   12 u32 function id
//  16 u16 kind (1 enter, 2 exit)  18 u16 flags (bit 0: captured while sampling)
//  20 u32 parent: sequence number of the caller's enter record on this thread (0xffffffff: none)
//  24 u64[6] enter: integer argument registers; exit: [0] return value, [1] duration ns
// A record's sequence number is its ring index; each batch says the sequence number of its first record,
// and its records are consecutive. Each thread keeps a stack of its open enter records, so parents are
// known here and the host needs no per-record work to link calls.
//
// Hot functions: each function counts its calls per one-second window; past `hotCallsPerSecond` it
// records only one call in `sampleEvery` (enter and exit together) until a window stays below it.

import { emit, HookFailure, HookTarget, SamplingConfig } from "./protocol.js";

export const RECORD_SIZE = 72;
const RING_CAPACITY = 1 << 18; // records; a power of two
const RING_HEADROOM = 1024; // slots kept free so racing reservations never overrun the reader
export const MAX_FUNCTIONS = 1 << 16;
const FSTATE_SIZE = 24;
const DRAIN_BATCH = 32768;
const DRAIN_INTERVAL_MS = 5;
const SAMPLING_SCAN_MS = 100;
const NAMES_CAPACITY = 4096; // a power of two
const THREAD_NAME_SIZE = 20;
const MAX_THREADS = 4096; // threads with a call stack; later ones are traced without parents
const MAX_DEPTH = 126;
const THREAD_STACK_SIZE = 8 + 4 * MAX_DEPTH;

const SOURCE = `
#include <glib.h>
#include <gum/guminterceptor.h>

typedef struct { gint64 sec; gint64 nsec; } Timespec;
extern int clock_gettime (int clock, Timespec * ts);

typedef struct {
  guint64 ts;
  guint32 tid;
  guint32 func;
  guint16 kind;
  guint16 flags;
  guint32 parent;
  guint64 a[6];
} Record;

typedef struct {
  guint32 tid;
  guint32 depth;
  guint32 stack[${MAX_DEPTH}];
} ThreadStack;

typedef struct {
  guint64 window_start;
  guint32 calls;
  guint32 sampling;
  guint32 sampled_out;
  guint32 reserved;
} FState;

typedef struct {
  guint64 enter_ts;
  guint32 skip;
  guint32 flags;
  guint32 depth;
} Invocation;

typedef struct {
  guint32 tid;
  guint32 stack_slot; /* index into shared.threads + 1; 0 until first looked up */
} ThreadState;

typedef struct {
  guint32 tid;
  gchar name[16];
} ThreadName;

extern gpointer pthread_self (void);
extern int pthread_getname_np (gpointer thread, gchar * name, gsize size);

typedef struct {
  Record * ring;
  guint32 * committed;
  FState * fstate;
  ThreadName * names;
  ThreadStack * threads;
  volatile guint32 head;
  volatile guint32 tail;
  volatile gint dropped;
  volatile guint32 hot_threshold;
  volatile guint32 sample_every;
  volatile guint32 names_head;
  volatile guint32 thread_count;
} Shared;

extern Shared shared;

#define CAPACITY ${RING_CAPACITY}u
#define NAMES_CAPACITY ${NAMES_CAPACITY}u
#define HEADROOM ${RING_HEADROOM}u
#define WINDOW_NS 1000000000ull
#define MAX_THREADS ${MAX_THREADS}u
#define MAX_DEPTH ${MAX_DEPTH}u
#define NO_PARENT 0xffffffffu
#define KIND_ENTER 1u
#define KIND_EXIT 2u
#define FLAG_SAMPLED 1u

static inline guint64
now_ns (void)
{
  Timespec t;
  clock_gettime (1, &t);
  return (guint64) t.sec * 1000000000ull + (guint64) t.nsec;
}

/* The calling thread's id and call stack, looked up once per (thread, hooked function). */
static inline ThreadState *
thread_state (GumInvocationContext * ic)
{
  ThreadState * state = GUM_IC_GET_THREAD_DATA (ic, ThreadState);
  if (state->tid == 0)
  {
    guint32 tid = gum_invocation_context_get_thread_id (ic);
    guint32 count = shared.thread_count, i;
    if (count > MAX_THREADS)
      count = MAX_THREADS;
    for (i = 0; i != count; i++)
    {
      if (shared.threads[i].tid == tid)
        break;
    }
    if (i == count)
    {
      /* A thread seen for the first time: give it a stack, and note its name while it is alive.
         Only this thread can claim a slot for its own id, so two claims never race on one tid. */
      guint32 slot = (guint32) g_atomic_int_add ((volatile gint *) &shared.names_head, 1);
      ThreadName * entry = &shared.names[slot & (NAMES_CAPACITY - 1)];
      entry->name[0] = 0;
      pthread_getname_np (pthread_self (), entry->name, sizeof (entry->name));
      entry->tid = tid;
      i = (guint32) g_atomic_int_add ((volatile gint *) &shared.thread_count, 1);
      if (i < MAX_THREADS)
      {
        shared.threads[i].depth = 0;
        shared.threads[i].tid = tid;
      }
    }
    state->stack_slot = i < MAX_THREADS ? i + 1 : 0;
    state->tid = tid;
  }
  return state;
}

static inline Record *
reserve (guint32 * index)
{
  if (shared.head - shared.tail >= CAPACITY - HEADROOM)
  {
    g_atomic_int_add (&shared.dropped, 1);
    return NULL;
  }
  *index = (guint32) g_atomic_int_add ((volatile gint *) &shared.head, 1);
  return &shared.ring[*index & (CAPACITY - 1)];
}

static inline void
commit (guint32 index)
{
  ((volatile guint32 *) shared.committed)[index & (CAPACITY - 1)] = index + 1;
}

void
on_enter (GumInvocationContext * ic)
{
  guint64 ts = now_ns ();
  guint32 func = GPOINTER_TO_UINT (gum_invocation_context_get_listener_function_data (ic));
  Invocation * inv = GUM_IC_GET_INVOCATION_DATA (ic, Invocation);
  FState * fs = &shared.fstate[func];
  guint32 calls, index, parent = NO_PARENT, depth;
  ThreadState * state;
  ThreadStack * st = NULL;
  GumCpuContext * cpu;
  Record * r;

  if (ts - fs->window_start >= WINDOW_NS)
  {
    fs->sampling = fs->calls >= shared.hot_threshold && ts - fs->window_start < 2 * WINDOW_NS;
    fs->window_start = ts;
    fs->calls = 0;
  }
  calls = ++fs->calls;
  if (calls >= shared.hot_threshold)
    fs->sampling = 1;
  inv->enter_ts = ts;
  inv->flags = 0;
  inv->skip = 0;
  if (fs->sampling)
  {
    if (calls % shared.sample_every != 0)
    {
      inv->skip = 1;
      fs->sampled_out++;
      return;
    }
    inv->flags = FLAG_SAMPLED;
  }

  state = thread_state (ic);
  if (state->stack_slot != 0)
    st = &shared.threads[state->stack_slot - 1];
  r = reserve (&index);
  if (st != NULL)
  {
    depth = st->depth;
    inv->depth = depth;
    if (depth > 0 && depth <= MAX_DEPTH)
      parent = st->stack[depth - 1];
    if (depth < MAX_DEPTH)
      st->stack[depth] = r != NULL ? index : NO_PARENT;
    st->depth = depth + 1;
  }
  if (r == NULL)
    return;
  cpu = ic->cpu_context;
  r->ts = ts;
  r->tid = state->tid;
  r->func = func;
  r->kind = KIND_ENTER;
  r->flags = (guint16) inv->flags;
  r->parent = parent;
  /* System V x86-64: the first six integer arguments, read straight from the saved registers. */
  r->a[0] = cpu->rdi;
  r->a[1] = cpu->rsi;
  r->a[2] = cpu->rdx;
  r->a[3] = cpu->rcx;
  r->a[4] = cpu->r8;
  r->a[5] = cpu->r9;
  commit (index);
}

void
on_leave (GumInvocationContext * ic)
{
  guint64 ts = now_ns ();
  guint32 func = GPOINTER_TO_UINT (gum_invocation_context_get_listener_function_data (ic));
  Invocation * inv = GUM_IC_GET_INVOCATION_DATA (ic, Invocation);
  guint32 index, parent = NO_PARENT;
  ThreadState * state;
  Record * r;

  if (inv->skip)
  {
    shared.fstate[func].sampled_out++;
    return;
  }
  state = thread_state (ic);
  if (state->stack_slot != 0)
  {
    /* Back to the depth of the matching enter, whatever happened to frames above it. */
    ThreadStack * st = &shared.threads[state->stack_slot - 1];
    st->depth = inv->depth;
    if (inv->depth > 0 && inv->depth <= MAX_DEPTH)
      parent = st->stack[inv->depth - 1];
  }
  r = reserve (&index);
  if (r == NULL)
    return;
  r->ts = ts;
  r->tid = state->tid;
  r->func = func;
  r->kind = KIND_EXIT;
  r->flags = (guint16) inv->flags;
  r->parent = parent;
  r->a[0] = ic->cpu_context->rax;
  r->a[1] = ts - inv->enter_ts;
  commit (index);
}

guint32
drain (Record * out, guint32 max)
{
  guint32 t = shared.tail;
  guint32 n = 0;
  while (n != max)
  {
    guint32 slot = t & (CAPACITY - 1);
    if (((volatile guint32 *) shared.committed)[slot] != t + 1)
      break;
    out[n] = shared.ring[slot];
    n++;
    t++;
  }
  shared.tail = t;
  return n;
}
`;

// Offsets of the Shared struct's fields, as laid out by the C compiler above.
const SHARED_HEAD = 5 * Process.pointerSize;
const SHARED_DROPPED = SHARED_HEAD + 8;
const SHARED_HOT = SHARED_HEAD + 12;
const SHARED_SAMPLE_EVERY = SHARED_HEAD + 16;
const SHARED_NAMES_HEAD = SHARED_HEAD + 20;
const SHARED_SIZE = SHARED_HEAD + 32;

export class Tracer {
  private readonly shared = Memory.alloc(SHARED_SIZE);
  private readonly ring = Memory.alloc(RING_CAPACITY * RECORD_SIZE);
  private readonly committed = Memory.alloc(RING_CAPACITY * 4);
  private readonly fstate = Memory.alloc(MAX_FUNCTIONS * FSTATE_SIZE);
  private readonly names = Memory.alloc(NAMES_CAPACITY * THREAD_NAME_SIZE);
  private readonly threads = Memory.alloc(MAX_THREADS * THREAD_STACK_SIZE);
  private namesTail = 0;
  private readonly out = Memory.alloc(DRAIN_BATCH * RECORD_SIZE);
  private readonly module: CModule;
  private readonly drainFn: NativeFunction<number, [NativePointerValue, number]>;
  private readonly listeners = new Map<number, InvocationListener>();
  private readonly sampling = new Map<number, boolean>();
  private lastSamplingScan = 0;
  private sampledOut = 0; // as of the last scan, removed hooks included
  private retiredSampledOut = 0;

  constructor() {
    this.shared.writeByteArray(new Array(SHARED_SIZE).fill(0));
    this.names.writeByteArray(new Array(NAMES_CAPACITY * THREAD_NAME_SIZE).fill(0));
    this.committed.writeByteArray(new Array(RING_CAPACITY * 4).fill(0));
    this.shared.writePointer(this.ring);
    this.shared.add(Process.pointerSize).writePointer(this.committed);
    this.shared.add(2 * Process.pointerSize).writePointer(this.fstate);
    this.shared.add(3 * Process.pointerSize).writePointer(this.names);
    this.shared.add(4 * Process.pointerSize).writePointer(this.threads);
    this.configureSampling({ hotCallsPerSecond: 100000, sampleEvery: 100 });
    this.module = new CModule(SOURCE, {
      shared: this.shared,
      clock_gettime: Module.getGlobalExportByName("clock_gettime"),
      pthread_self: Module.getGlobalExportByName("pthread_self"),
      pthread_getname_np: Module.getGlobalExportByName("pthread_getname_np"),
    });
    this.drainFn = new NativeFunction(this.module.drain, "uint32", ["pointer", "uint32"]);
  }

  get activeCount(): number {
    return this.listeners.size;
  }

  configureSampling(config: SamplingConfig): void {
    this.shared.add(SHARED_HOT).writeU32(Math.max(1, config.hotCallsPerSecond));
    this.shared.add(SHARED_SAMPLE_EVERY).writeU32(Math.max(1, config.sampleEvery));
  }

  add(targets: HookTarget[]): HookFailure[] {
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
      try {
        const listener = Interceptor.attach(
          ptr(target.address),
          { onEnter: this.module.on_enter, onLeave: this.module.on_leave },
          ptr(target.id),
        );
        this.listeners.set(target.id, listener);
      } catch (e) {
        failed.push({ id: target.id, error: String(e) });
      }
    }
    Interceptor.flush();
    return failed;
  }

  remove(targets: HookTarget[]): HookFailure[] {
    for (const target of targets) {
      const listener = this.listeners.get(target.id);
      if (listener !== undefined) {
        listener.detach();
        this.retiredSampledOut += this.fstate.add(target.id * FSTATE_SIZE + 16).readU32();
        this.listeners.delete(target.id);
        this.sampling.delete(target.id);
      }
    }
    Interceptor.flush();
    return [];
  }

  start(): void {
    const tick = (): void => {
      this.flush();
      setTimeout(tick, DRAIN_INTERVAL_MS);
    };
    setTimeout(tick, DRAIN_INTERVAL_MS);
  }

  // `final`: the process is exiting; bring the sampling counters up to date before the last batch.
  flush(final = false): void {
    if (final) {
      this.scanSampling();
    }
    let n: number;
    do {
      const firstSeq = this.shared.add(SHARED_HEAD + 4).readU32();
      n = this.drainFn(this.out, DRAIN_BATCH);
      if (n > 0) {
        emit(
          {
            type: "trace_batch",
            count: n,
            firstSeq,
            dropped: this.shared.add(SHARED_DROPPED).readS32(),
            sampledOut: this.sampledOut,
            threads: this.newThreadNames(),
          },
          this.out.readByteArray(n * RECORD_SIZE),
        );
      }
    } while (n === DRAIN_BATCH);
    if (final) {
      // The loss counters may have moved since the last batch: an empty batch carries their last values.
      emit({
        type: "trace_batch",
        count: 0,
        firstSeq: this.shared.add(SHARED_HEAD + 4).readU32(),
        dropped: this.shared.add(SHARED_DROPPED).readS32(),
        sampledOut: this.sampledOut,
        threads: this.newThreadNames(),
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
      const tid = entry.readU32();
      if (tid !== 0) {
        const raw = new Uint8Array(entry.add(4).readByteArray(16) ?? new ArrayBuffer(0));
        const end = raw.indexOf(0);
        out.push([tid, entry.add(4).readUtf8String(end < 0 ? raw.length : end) ?? ""]);
      }
    }
    return out;
  }

  private scanSampling(): void {
    const every = this.shared.add(SHARED_SAMPLE_EVERY).readU32();
    let sampledOut = this.retiredSampledOut;
    for (const id of this.listeners.keys()) {
      const state = this.fstate.add(id * FSTATE_SIZE);
      sampledOut += state.add(16).readU32();
      const enabled = state.add(12).readU32() !== 0;
      if (enabled !== (this.sampling.get(id) ?? false)) {
        this.sampling.set(id, enabled);
        emit({
          type: "sampling_state_change",
          funcId: id,
          enabled,
          sampleRate: 1 / every,
          sampledOut: state.add(16).readU32(),
        });
      }
    }
    this.sampledOut = sampledOut;
  }
}
