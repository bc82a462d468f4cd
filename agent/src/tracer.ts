// Native function tracing on the hot path: Interceptor listeners implemented in C (CModule) write
// fixed-size binary records into one ring buffer with atomic slot reservation; a JS timer drains the
// ring in large batches and sends them to the host as binary messages. No JavaScript runs per call.
//
// Record layout (RECORD_SIZE bytes, little endian), decoded by src/strobe/instrument/records.py:
//   0 u64 timestamp (CLOCK_MONOTONIC ns)   8 u32 thread id   12 u32 function id
//  16 u16 kind (1 enter, 2 exit, 3 watch)  18 u16 flags (bit 0: captured while sampling; bit 1: native watch
//      values in the record just before; bit 2: JavaScript watch values under this sequence number; bit 3:
//      followed pointer arguments / return value under this sequence number)
//  20 u32 parent: sequence number of the caller's enter record on this thread (0xffffffff: none)
//  24 u64[6] enter: integer argument registers; exit: [0] return value, [1] duration ns
// A record's sequence number is its ring index; each batch says the sequence number of its first record,
// and its records are consecutive. Each thread keeps a stack of its open enter records, so parents are
// known here and the host needs no per-record work to link calls.
//
// Watches: up to 4 scalars at fixed addresses are read right here and written as a KIND_WATCH record
// (a[slot] = the value's bytes, flags = slot mask) in the slot just before their call's record, committed
// first; other watches are read by a JavaScript callback (watches.ts) before the call's record is committed.
// The same callback follows pointer arguments and return values through their types (follow.ts).
//
// Hot functions: each function counts its calls per one-second window; past `hotCallsPerSecond` it
// records only one call in `sampleEvery` (enter and exit together) until a window stays below it.
//
// Cost per traced call (enter + exit) on a 2-core VM, thread CPU time: ~250 ns is Frida's Interceptor
// itself (its trampolines save the full CPU state, fxsave/fxrstor included, on enter and on leave), ~30-40 ns
// is the code below. Where the kernel keeps time with the TSC, the hot path reads it (rdtsc, ~12 ns) instead
// of calling clock_gettime (~30 ns, twice per call); drain() turns ticks into CLOCK_MONOTONIC nanoseconds
// before a batch leaves, so records carry the same clock either way. Per-thread state sits in a TLS slot
// (Frida's per-listener thread data is a linear search over every hooked function the thread has called),
// on_leave reads everything it needs from the invocation data left by on_enter, and batches are sent
// straight from the ring, small enough that no buffer on the way is big enough to be mmap'd and
// page-faulted afresh for every batch: the drain is CPU taken from the traced program on a small machine.

import { ArgFollower } from "./follow.js";
import { emit, FollowFunction, HookFailure, HookTarget, JsWatchSpec, NativeWatchSpec, SamplingConfig } from "./protocol.js";
import { JsWatches } from "./watches.js";

export const RECORD_SIZE = 72;
const RING_CAPACITY = 1 << 18; // records; a power of two
const RING_HEADROOM = 1024; // slots kept free so racing reservations never overrun the reader
export const MAX_FUNCTIONS = 1 << 16;
const FSTATE_SIZE = 32; // padded so a function's state never straddles two cache lines
const DRAIN_BATCH = 2048; // records per message; larger batches cost more in page faults than they save
const DRAIN_INTERVAL_MS = 5;
const SAMPLING_SCAN_MS = 100;
const NAMES_CAPACITY = 4096; // a power of two
const THREAD_NAME_SIZE = 20;
const MAX_THREADS = 4096; // threads with a call stack; later ones are traced without parents
const MAX_DEPTH = 126;
const THREAD_STACK_SIZE = 8 + 4 * MAX_DEPTH;

function cSource(useTsc: boolean): string {
  return `
#include <glib.h>
#include <gum/guminterceptor.h>
#include <gum/gumtls.h>

${useTsc ? "#define USE_TSC 1" : ""}

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
  volatile guint32 sampled_out;
  volatile guint32 watch_mask; /* bits 0-3: native watch slots read for this function; bit 4: JS watches;
                                  bit 5: arguments followed on entry; bit 6: return value followed on exit */
  guint32 reserved[2];
} FState;

typedef struct {
  guint64 address;
  guint32 size;
  guint32 reserved;
} NativeWatch;

/* What on_enter leaves for on_leave, so the exit needs no lookups. */
typedef struct {
  guint64 enter_ts;
  ThreadStack * st; /* NULL: the thread has no stack (past MAX_THREADS) */
  guint32 func;
  guint32 tid;
  guint32 depth;
  guint32 flags;
} Invocation;

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
  volatile guint32 follow_limit; /* calls per window of a function whose pointers are followed */
  guint64 window; /* a sampling window, in clock ticks */
  /* The module's own state lives here too: TinyCC's static variables are read-only once linked. */
  GumTlsKey thread_key;
  guint32 converted; /* ring sequence number up to which ticks are already nanoseconds */
  guint32 reserved2;
  gdouble ns_per_tick;
  guint64 anchor_ticks, rate_ticks, next_ticks;
  gint64 anchor_ns, rate_ns, next_ns;
  NativeWatch native[4];
  void (* js_hook) (guint32 func, guint32 seq, Record * r, guint32 wm);
} Shared;

typedef char shared_fits[sizeof (Shared) <= ${SHARED_SIZE} ? 1 : -1];

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
#define KIND_WATCH 3u
#define FLAG_SAMPLED 1u
#define FLAG_NATIVE_WATCH 2u
#define FLAG_JS_WATCH 4u
#define FLAG_FOLLOWED 8u
#define JS_WORK (16u | 32u | 64u)
#define WATCH_SHIFT 8
#define SKIP 0x80000000u

/* TinyCC inlines nothing: the hot path uses macros, not functions. */
#define RDTSC(v) do { guint32 lo_, hi_; __asm__ __volatile__ ("rdtsc" : "=a" (lo_), "=d" (hi_)); \\
    (v) = ((guint64) hi_ << 32) | lo_; } while (0)
#ifdef USE_TSC
/* Raw TSC ticks (constant and synchronised: the kernel's clocksource is "tsc"); drain() turns them into
   CLOCK_MONOTONIC nanoseconds before a batch leaves. Half the cost of clock_gettime. */
# define NOW(v) RDTSC (v)
#else
# define NOW(v) do { Timespec t_; clock_gettime (1, &t_); \\
    (v) = (guint64) t_.sec * 1000000000ull + (guint64) t_.nsec; } while (0)
#endif
/* Atomics through a register operand: TinyCC gets memory operands on extern symbols wrong. */
#define FETCH_ADD(p, v, out) \\
    __asm__ __volatile__ ("lock; xaddl %0, (%1)" : "=r" (out) : "r" (p), "0" (v) : "memory")
#define ATOMIC_INC(p) __asm__ __volatile__ ("lock; incl (%0)" : : "r" (p) : "memory")
/* Claims n consecutive ring slots, the call's record in the last: r is NULL (and the loss counted) when the
   ring is full. */
#define RESERVE(r, index, n) do { \\
    if (shared.head - shared.tail >= CAPACITY - HEADROOM) { ATOMIC_INC (&shared.dropped); (r) = NULL; } \\
    else { FETCH_ADD (&shared.head, (n), index); (index) += (n) - 1; \\
      (r) = &shared.ring[(index) & (CAPACITY - 1)]; } } while (0)
/* x86 keeps stores in order: the record is complete before its slot is marked. */
#define COMMIT(index) (((volatile guint32 *) shared.committed)[(index) & (CAPACITY - 1)] = (index) + 1)
#define TAGGED_TID(tid) ((ThreadStack *) GSIZE_TO_POINTER (((gsize) (tid) << 1) | 1))

/* A native watch's value: 1, 2, 4 or 8 bytes at a fixed address (a global: always mapped). */
static guint64
read_watch (guint32 i)
{
  NativeWatch * w = &shared.native[i];
  switch (w->size)
  {
    case 1: return *(volatile guint8 *) GSIZE_TO_POINTER (w->address);
    case 2: return *(volatile guint16 *) GSIZE_TO_POINTER (w->address);
    case 4: return *(volatile guint32 *) GSIZE_TO_POINTER (w->address);
    default: return *(volatile guint64 *) GSIZE_TO_POINTER (w->address);
  }
}

/* The watches of a call whose record r (sequence number index) is filled but not committed: native values
   into the slot reserved just before it (committed first), then the JavaScript callback. */
static void
record_watches (Record * r, guint32 index, guint32 wm)
{
  if ((wm & 15u) != 0)
  {
    Record * w = &shared.ring[(index - 1) & (CAPACITY - 1)];
    guint32 i;
    w->ts = r->ts;
    w->tid = r->tid;
    w->func = r->func;
    w->kind = KIND_WATCH;
    w->flags = (guint16) (wm & 15u);
    w->parent = NO_PARENT;
    for (i = 0; i != 6; i++)
      w->a[i] = (i < 4 && (wm & (1u << i)) != 0) ? read_watch (i) : 0;
    r->flags |= FLAG_NATIVE_WATCH;
    COMMIT (index - 1);
  }
  if ((wm & JS_WORK) != 0 && shared.js_hook != NULL)
  {
    if ((wm & 16u) != 0)
      r->flags |= FLAG_JS_WATCH;
    if ((wm & (r->kind == KIND_ENTER ? 32u : 64u)) != 0)
      r->flags |= FLAG_FOLLOWED;
    shared.js_hook (r->func, index, r, wm);
  }
}

gpointer
watch_config (void)
{
  return &shared.native[0];
}

gpointer
js_hook_slot (void)
{
  return &shared.js_hook;
}

static gint64
clock_ns (void)
{
  Timespec t;
  clock_gettime (1, &t);
  return t.sec * 1000000000ll + t.nsec;
}

/* The calling thread's stack, found once per thread and then kept in a TLS slot (not Frida's per-listener
   thread data, whose lookup is linear in the number of hooked functions the thread has called). Threads past
   MAX_THREADS get their id tagged in the slot instead. */
static ThreadStack *
thread_register (GumInvocationContext * ic)
{
  guint32 tid = gum_invocation_context_get_thread_id (ic);
  guint32 count = shared.thread_count, i;
  ThreadStack * st;
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
  else
  {
    /* A new thread reusing the id of one that ended: none of the old frames are open. */
    shared.threads[i].depth = 0;
  }
  st = i < MAX_THREADS ? &shared.threads[i] : TAGGED_TID (tid);
  gum_tls_key_set_value (shared.thread_key, st);
  return st;
}

void
on_enter (GumInvocationContext * ic)
{
  guint64 ts;
  Invocation * inv;
  FState * fs;
  ThreadStack * st;
  GumCpuContext * cpu;
  Record * r;
  guint32 func, calls, index = 0, parent = NO_PARENT, depth, tid, wm;

  NOW (ts);
  inv = GUM_IC_GET_INVOCATION_DATA (ic, Invocation);
  func = GPOINTER_TO_UINT (gum_invocation_context_get_listener_function_data (ic));
  fs = &shared.fstate[func];
  inv->enter_ts = ts;
  inv->func = func;
  inv->flags = 0;

  if (ts - fs->window_start >= shared.window)
  {
    fs->sampling = fs->calls >= shared.hot_threshold && ts - fs->window_start < 2 * shared.window;
    fs->window_start = ts;
    fs->calls = 0;
  }
  calls = ++fs->calls;
  if (calls >= shared.hot_threshold)
    fs->sampling = 1;
  if (fs->sampling)
  {
    if (calls % shared.sample_every != 0)
    {
      inv->flags = SKIP;
      ATOMIC_INC (&fs->sampled_out);
      return;
    }
    inv->flags = FLAG_SAMPLED;
  }

  st = (ThreadStack *) gum_tls_key_get_value (shared.thread_key);
  if (st == NULL)
    st = thread_register (ic);
  if ((GPOINTER_TO_SIZE (st) & 1) != 0)
  {
    tid = (guint32) (GPOINTER_TO_SIZE (st) >> 1);
    st = NULL;
  }
  else
  {
    tid = st->tid;
  }
  inv->st = st;
  inv->tid = tid;
  wm = fs->watch_mask;
  if (calls > shared.follow_limit)
    wm &= ~96u; /* following costs microseconds in JavaScript: past the limit, calls keep their addresses */
  inv->flags |= wm << WATCH_SHIFT;
  RESERVE (r, index, (wm & 15u) != 0 ? 2u : 1u);
  if (st != NULL)
  {
    depth = st->depth;
    inv->depth = depth;
    if (depth - 1 < MAX_DEPTH) /* 0 < depth <= MAX_DEPTH */
      parent = st->stack[depth - 1];
    if (depth < MAX_DEPTH)
      st->stack[depth] = r != NULL ? index : NO_PARENT;
    st->depth = depth + 1;
  }
  if (r == NULL)
    return;
  cpu = ic->cpu_context;
  r->ts = ts;
  r->tid = tid;
  r->func = func;
  r->kind = KIND_ENTER;
  r->flags = (guint16) (inv->flags & 0xffu);
  r->parent = parent;
  /* System V x86-64: the first six integer arguments, read straight from the saved registers. */
  r->a[0] = cpu->rdi;
  r->a[1] = cpu->rsi;
  r->a[2] = cpu->rdx;
  r->a[3] = cpu->rcx;
  r->a[4] = cpu->r8;
  r->a[5] = cpu->r9;
  if (wm != 0)
    record_watches (r, index, wm);
  COMMIT (index);
}

void
on_leave (GumInvocationContext * ic)
{
  guint64 ts;
  Invocation * inv;
  ThreadStack * st;
  Record * r;
  guint32 index = 0, parent = NO_PARENT, depth, wm;

  NOW (ts);
  inv = GUM_IC_GET_INVOCATION_DATA (ic, Invocation);
  if (inv->flags == SKIP)
  {
    ATOMIC_INC (&shared.fstate[inv->func].sampled_out);
    return;
  }
  st = inv->st;
  if (st != NULL)
  {
    /* Back to the depth of the matching enter, whatever happened to frames above it. */
    depth = inv->depth;
    st->depth = depth;
    if (depth - 1 < MAX_DEPTH)
      parent = st->stack[depth - 1];
  }
  wm = inv->flags >> WATCH_SHIFT;
  RESERVE (r, index, (wm & 15u) != 0 ? 2u : 1u);
  if (r == NULL)
    return;
  r->ts = ts;
  r->tid = inv->tid;
  r->func = inv->func;
  r->kind = KIND_EXIT;
  r->flags = (guint16) (inv->flags & 0xffu);
  r->parent = parent;
  r->a[0] = ic->cpu_context->rax;
  r->a[1] = ts - inv->enter_ts; /* in ticks until drain() */
  if (wm != 0)
    record_watches (r, index, wm);
  COMMIT (index);
}

#ifdef USE_TSC
/* Ticks to CLOCK_MONOTONIC: an anchor (ticks, ns) taken at every drain, and a rate measured over the last
   one to two seconds, so NTP slewing of CLOCK_MONOTONIC is followed. A record is at most a few drain
   intervals older than the anchor, so the conversion error stays within nanoseconds. */
static void
sample_clocks (guint64 * ticks, gint64 * ns)
{
  guint64 best = ~0ull, t0, t1;
  gint64 n;
  guint i;
  for (i = 0; i != 5; i++)
  {
    RDTSC (t0);
    n = clock_ns ();
    RDTSC (t1);
    if (t1 - t0 < best)
    {
      best = t1 - t0;
      *ticks = t0 + (t1 - t0) / 2;
      *ns = n;
    }
  }
}

static void
measure_rate (void)
{
  if (shared.anchor_ticks > shared.rate_ticks && shared.anchor_ns > shared.rate_ns)
    shared.ns_per_tick = (gdouble) (shared.anchor_ns - shared.rate_ns) /
        (gdouble) (gint64) (shared.anchor_ticks - shared.rate_ticks);
}

static void
recalibrate (void)
{
  sample_clocks (&shared.anchor_ticks, &shared.anchor_ns);
  measure_rate ();
  if (shared.anchor_ns - shared.next_ns >= 1000000000ll)
  {
    shared.rate_ticks = shared.next_ticks;
    shared.rate_ns = shared.next_ns;
    shared.next_ticks = shared.anchor_ticks;
    shared.next_ns = shared.anchor_ns;
  }
}

static gint64
round_ns (gdouble v)
{
  return (gint64) (v >= 0 ? v + 0.5 : v - 0.5);
}
#endif

void
init (void)
{
  shared.thread_key = gum_tls_key_new ();
#ifdef USE_TSC
  sample_clocks (&shared.rate_ticks, &shared.rate_ns);
  shared.next_ticks = shared.rate_ticks;
  shared.next_ns = shared.rate_ns;
  do
    sample_clocks (&shared.anchor_ticks, &shared.anchor_ns);
  while (shared.anchor_ns - shared.rate_ns < 2000000); /* 2 ms: a first rate, refined at every drain */
  measure_rate ();
  /* Ticks per second in integers: TinyCC's conversion of a large double to a 64-bit integer is unreliable. */
  shared.window = (shared.anchor_ticks - shared.rate_ticks) * 1000000000ull /
      (guint64) (shared.anchor_ns - shared.rate_ns);
#else
  shared.window = WINDOW_NS;
#endif
}

void
finalize (void)
{
  gum_tls_key_free (shared.thread_key);
}

/* The committed records from the tail on, up to the end of the ring and at most max, with their clocks in
   nanoseconds. The caller sends them straight from the ring, then moves the tail past them. */
guint32
drain (guint32 max)
{
  guint32 t = shared.tail;
  guint32 slot = t & (CAPACITY - 1);
  guint32 n = 0;
#ifdef USE_TSC
  Record * r;
  gint64 base;
  gdouble rate;
  recalibrate ();
  base = shared.anchor_ns;
  rate = shared.ns_per_tick;
#endif
  if (max > CAPACITY - slot)
    max = CAPACITY - slot;
  while (n != max && ((volatile guint32 *) shared.committed)[slot + n] == t + n + 1)
  {
#ifdef USE_TSC
    /* A batch whose send failed is drained again: convert each record once. */
    if ((gint32) (t + n - shared.converted) >= 0)
    {
      r = &shared.ring[slot + n];
      r->ts = (guint64) (base + round_ns ((gdouble) (gint64) (r->ts - shared.anchor_ticks) * rate));
      if (r->kind == KIND_EXIT)
        r->a[1] = (guint64) round_ns ((gdouble) (gint64) r->a[1] * rate);
      shared.converted = t + n + 1;
    }
#endif
    n++;
  }
  return n;
}
`;
}

// Offsets of the Shared struct's fields, as laid out by the C compiler above.
const SHARED_HEAD = 5 * Process.pointerSize;
const SHARED_TAIL = SHARED_HEAD + 4;
const SHARED_DROPPED = SHARED_HEAD + 8;
const SHARED_HOT = SHARED_HEAD + 12;
const SHARED_SAMPLE_EVERY = SHARED_HEAD + 16;
const SHARED_NAMES_HEAD = SHARED_HEAD + 20;
const SHARED_FOLLOW_LIMIT = SHARED_HEAD + 28;
// Calls per second of one function whose pointer arguments are followed (JavaScript, ~10-30 us a call);
// later calls in the same second show addresses, so following can never take over a hot function.
const FOLLOW_PER_SECOND = 1000;
const SHARED_SIZE = SHARED_HEAD + 256;
const FSTATE_WATCH_MASK = 20;
const NATIVE_WATCH_SIZE = 16;

// TSC ticks can stand in for CLOCK_MONOTONIC when the kernel itself keeps time with them (constant,
// synchronised across CPUs); anywhere else the hot path reads clock_gettime.
function tscIsClocksource(): boolean {
  if (Process.arch !== "x64") {
    return false;
  }
  try {
    return File.readAllText("/sys/devices/system/clocksource/clocksource0/current_clocksource").trim() === "tsc";
  } catch {
    return false;
  }
}

export class Tracer {
  private readonly shared = Memory.alloc(SHARED_SIZE);
  private readonly ring = Memory.alloc(RING_CAPACITY * RECORD_SIZE);
  private readonly committed = Memory.alloc(RING_CAPACITY * 4);
  private readonly fstate = Memory.alloc(MAX_FUNCTIONS * FSTATE_SIZE);
  private readonly names = Memory.alloc(NAMES_CAPACITY * THREAD_NAME_SIZE);
  private readonly threads = Memory.alloc(MAX_THREADS * THREAD_STACK_SIZE);
  private namesTail = 0;
  private readonly module: CModule;
  private readonly drainFn: NativeFunction<number, [number]>;
  private readonly listeners = new Map<number, InvocationListener>();
  private readonly sampling = new Map<number, boolean>();
  private lastSamplingScan = 0;
  private sampledOut = 0; // as of the last scan, removed hooks included
  private retiredSampledOut = 0;
  private readonly jsWatches = new JsWatches();
  private nativeWatches: NativeWatchSpec[] = [];
  private readonly follower = new ArgFollower();
  private readonly jsHook: NativeCallback<"void", ["uint32", "uint32", "pointer", "uint32"]>;

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
    this.shared.add(SHARED_FOLLOW_LIMIT).writeU32(FOLLOW_PER_SECOND);
    this.module = new CModule(cSource(tscIsClocksource()), {
      shared: this.shared,
      clock_gettime: Module.getGlobalExportByName("clock_gettime"),
      pthread_self: Module.getGlobalExportByName("pthread_self"),
      pthread_getname_np: Module.getGlobalExportByName("pthread_getname_np"),
    });
    this.drainFn = new NativeFunction(this.module.drain, "uint32", ["uint32"]);
    const watches = this.jsWatches;
    const follower = this.follower;
    this.jsHook = new NativeCallback(
      (func: number, seq: number, record: NativePointer, mask: number) => {
        if ((mask & 16) !== 0) {
          watches.onRecord(func, seq);
        }
        if ((mask & 96) !== 0) {
          follower.onRecord(func, seq, record);
        }
      },
      "void",
      ["uint32", "uint32", "pointer", "uint32"],
    );
    new NativeFunction(this.module.js_hook_slot, "pointer", [])().writePointer(this.jsHook);
  }

  // Replace the watches. Records made under the old ones leave first, so the host decodes each batch with
  // the watches it was recorded under. Returns the JavaScript watches refused (expressions that fail to compile).
  setWatches(native: NativeWatchSpec[], js: JsWatchSpec[]): { id: number; error: string }[] {
    for (const id of this.listeners.keys()) {
      this.fstate.add(id * FSTATE_SIZE + FSTATE_WATCH_MASK).writeU32(0);
    }
    this.flush();
    const slots = new NativeFunction(this.module.watch_config, "pointer", [])();
    for (const watch of native) {
      const slot = slots.add(watch.slot * NATIVE_WATCH_SIZE);
      slot.writeU64(uint64(watch.address));
      slot.add(8).writeU32(watch.size);
    }
    this.nativeWatches = native;
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
      mask |= 16;
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
      this.applyWatchMask(target.id);
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
