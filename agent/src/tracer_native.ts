// The native half of function tracing (used by tracer.ts): the CModule source, its memory layout and the
// offsets JavaScript reads it at. Interceptor listeners implemented in C write
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

export const RECORD_SIZE = 72;
export const RING_CAPACITY = 1 << 18; // records; a power of two
const RING_HEADROOM = 1024; // slots kept free so racing reservations never overrun the reader
export const MAX_FUNCTIONS = 1 << 16;
export const FSTATE_SIZE = 32; // padded so a function's state never straddles two cache lines
export const NAMES_CAPACITY = 4096; // a power of two
export const THREAD_NAME_SIZE = 20;
export const MAX_THREADS = 4096; // threads with a call stack; later ones are traced without parents
const MAX_DEPTH = 126;
export const THREAD_STACK_SIZE = 8 + 4 * MAX_DEPTH;

export function cSource(useTsc: boolean): string {
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
export const SHARED_HEAD = 5 * Process.pointerSize;
export const SHARED_TAIL = SHARED_HEAD + 4;
export const SHARED_DROPPED = SHARED_HEAD + 8;
export const SHARED_HOT = SHARED_HEAD + 12;
export const SHARED_SAMPLE_EVERY = SHARED_HEAD + 16;
export const SHARED_NAMES_HEAD = SHARED_HEAD + 20;
export const SHARED_FOLLOW_LIMIT = SHARED_HEAD + 28;
// Calls per second of one function whose pointer arguments are followed (JavaScript, ~10-30 us a call);
// later calls in the same second show addresses, so following can never take over a hot function.
export const FOLLOW_PER_SECOND = 1000;
export const SHARED_SIZE = SHARED_HEAD + 256;
export const FSTATE_WATCH_MASK = 20;
export const NATIVE_WATCH_SIZE = 16;

// TSC ticks can stand in for CLOCK_MONOTONIC when the kernel itself keeps time with them (constant,
// synchronised across CPUs); anywhere else the hot path reads clock_gettime.
export function tscIsClocksource(): boolean {
  if (Process.arch !== "x64") {
    return false;
  }
  try {
    return File.readAllText("/sys/devices/system/clocksource/clocksource0/current_clocksource").trim() === "tsc";
  } catch {
    return false;
  }
}
