/* The native half of function tracing: Interceptor listeners run by Frida's CModule (built by cmodule.ts,
   driven by tracer.ts). They write fixed-size binary records into one ring buffer with atomic slot
   reservation; a JavaScript timer drains the ring in large batches and sends them to the host as binary
   messages. No JavaScript runs per call unless a JavaScript watch or a followed pointer asks for it.

   Compiled with a #define prelude generated from layout.ts (cPrelude): every size, offset and bit shared with
   JavaScript and the host comes from there, and the structs (tracer.h) are checked against it at compile time.
   USE_TSC is defined where the kernel keeps time with the TSC. agent_build embeds this file, tracer.h inlined,
   as a string; tests/instrument compiles it with gcc (stub glib/gum headers, -Wall -Wextra -Werror) both ways.

   Records (layout.ts has the offsets; src/strobe/instrument/records.py decodes them): a record's sequence
   number is its ring index; each batch says the sequence number of its first record, and its records are
   consecutive. Each thread keeps a stack of its open enter records, so parents are known here and the host
   needs no per-record work to link calls.

   Watches: up to NATIVE_WATCH_SLOTS scalars at fixed addresses are read right here and written as a
   KIND_WATCH record (a[slot] = the value's bytes, flags = slot mask) in the slot just before their call's
   record, committed first; other watches are read by a JavaScript callback (watches.ts) before the call's
   record is committed. The same callback follows pointer arguments and return values (follow.ts).

   Arguments beyond the integer registers: a function whose signature has float/double parameters, or
   parameters on the stack (past the sixth, structs passed in memory), gets WATCH_CAPTURE_* bits with its
   argument plan; its calls then also write a KIND_XMM and/or a KIND_STACK record in the slots before theirs
   (record_capture), and its exits rdx, xmm0 and xmm1 for values returned there. Other functions pay nothing.

   Hot functions: each function counts its calls per one-second window; past `hotCallsPerSecond` it records
   only one call in `sampleEvery` (enter and exit together) until a window stays below it.

   Cost per traced call (enter + exit) on a 2-core VM, thread CPU time: ~250 ns is Frida's Interceptor itself
   (its trampolines save the full CPU state, fxsave/fxrstor included, on enter and on leave), ~30-40 ns is the
   code below. Where the kernel keeps time with the TSC, the hot path reads it (rdtsc, ~12 ns) instead of
   calling clock_gettime (~30 ns, twice per call); drain() turns ticks into CLOCK_MONOTONIC nanoseconds before a
   batch leaves, so records carry the same clock either way. Per-thread state sits in a TLS slot (Frida's
   per-listener thread data is a linear search over every hooked function the thread has called), on_leave
   reads everything it needs from the invocation data left by on_enter, and batches are sent straight from the
   ring, small enough that no buffer on the way is big enough to be mmap'd and page-faulted afresh for every
   batch: the drain is CPU taken from the traced program on a small machine. */

#include <glib.h>
#include <gum/guminterceptor.h>
#include <gum/gumtls.h>
#include "tracer.h"

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
  if ((wm & WATCH_NATIVE) != 0)
  {
    Record * w = &shared.ring[(index - 1) & (RING_CAPACITY - 1)];
    guint32 i;
    w->ts = r->ts;
    w->tid = r->tid;
    w->func = r->func;
    w->kind = KIND_WATCH;
    w->flags = (guint16) (wm & WATCH_NATIVE);
    w->parent = NO_PARENT;
    for (i = 0; i != RECORD_ARG_COUNT; i++)
      w->a[i] = (i < NATIVE_WATCH_SLOTS && (wm & (1u << i)) != 0) ? read_watch (i) : 0;
    r->flags |= FLAG_NATIVE_WATCH;
    COMMIT (index - 1);
  }
  if ((wm & WATCH_JS_WORK) != 0 && shared.js_hook != NULL)
  {
    if ((wm & WATCH_JS) != 0)
      r->flags |= FLAG_JS_WATCH;
    if ((wm & (r->kind == KIND_ENTER ? WATCH_FOLLOW_ENTER : WATCH_FOLLOW_EXIT)) != 0)
      r->flags |= FLAG_FOLLOWED;
    shared.js_hook (r->func, index, r, wm);
  }
}

/* A capture record in the ring slot `index`, its header copied from the call's record r. */
static Record *
capture_slot (const Record * r, guint32 index, guint16 kind)
{
  Record * e = &shared.ring[index & (RING_CAPACITY - 1)];
  e->ts = r->ts;
  e->tid = r->tid;
  e->func = r->func;
  e->kind = kind;
  e->flags = 0;
  e->parent = NO_PARENT;
  return e;
}

/* The argument words of a call that its signature needs beyond the integer registers (WATCH_CAPTURE_*), in the
   slots just before the call's record r (and before its native watch slot, if any), committed first: `last` is
   the highest of them. Frida's trampoline saved the caller's xmm registers (fxsave) and cpu->xmm points at
   them, 16 bytes each; the stack arguments start above the return address. */
static void
record_capture (Record * r, guint32 last, guint32 wm, GumCpuContext * cpu)
{
  Record * e;
  guint32 i;
  if ((wm & WATCH_CAPTURE_STACK) != 0)
  {
    const guint64 * sp = (const guint64 *) GSIZE_TO_POINTER (cpu->rsp);
    e = capture_slot (r, last, KIND_STACK);
    for (i = 0; i != RECORD_ARG_COUNT; i++)
      e->a[i] = sp[1 + i];
    COMMIT (last);
    last--;
  }
  if ((wm & WATCH_CAPTURE_XMM) != 0)
  {
    const guint64 * x = (const guint64 *) cpu->xmm;
    e = capture_slot (r, last, KIND_XMM);
    for (i = 0; i != RECORD_ARG_COUNT; i++)
      e->a[i] = x[2 * i];
    COMMIT (last);
  }
  r->flags |= FLAG_EXT;
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
  guint32 func, calls, index = 0, parent = NO_PARENT, depth, tid, wm, native, ext;

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
      inv->flags = INVOCATION_SKIP;
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
  if (calls > shared.follow_limit && (wm & WATCH_FOLLOW) != 0)
  {
    wm &= ~WATCH_FOLLOW; /* following costs microseconds in JavaScript: past the limit, calls keep their addresses */
    inv->flags |= FLAG_UNFOLLOWED; /* and their events say why */
  }
  inv->flags |= wm << WATCH_SHIFT;
  native = (wm & WATCH_NATIVE) != 0 ? 1u : 0u;
  ext = ((wm & WATCH_CAPTURE_XMM) != 0 ? 1u : 0u) + ((wm & WATCH_CAPTURE_STACK) != 0 ? 1u : 0u);
  RESERVE (r, index, 1u + native + ext);
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
  r->flags = (guint16) (inv->flags & INVOCATION_RECORD_FLAGS);
  r->parent = parent;
  /* System V x86-64: the first six integer arguments, read straight from the saved registers. */
  r->a[0] = cpu->rdi;
  r->a[1] = cpu->rsi;
  r->a[2] = cpu->rdx;
  r->a[3] = cpu->rcx;
  r->a[4] = cpu->r8;
  r->a[5] = cpu->r9;
  if (ext != 0)
    record_capture (r, index - 1u - native, wm, cpu);
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
  if (inv->flags == INVOCATION_SKIP)
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
  RESERVE (r, index, (wm & WATCH_NATIVE) != 0 ? 2u : 1u);
  if (r == NULL)
    return;
  r->ts = ts;
  r->tid = inv->tid;
  r->func = inv->func;
  r->kind = KIND_EXIT;
  r->flags = (guint16) (inv->flags & INVOCATION_RECORD_FLAGS);
  r->parent = parent;
  r->a[0] = ic->cpu_context->rax;
  r->a[1] = ts - inv->enter_ts; /* in ticks until drain() */
  if ((wm & WATCH_CAPTURE_RETURN) != 0)
  {
    /* The second integer return register and the two SSE ones (the low 8 bytes of each). */
    const guint64 * x = (const guint64 *) ic->cpu_context->xmm;
    r->a[2] = ic->cpu_context->rdx;
    r->a[3] = x[0];
    r->a[4] = x[2];
    r->flags |= FLAG_EXT;
  }
  if (wm != 0)
    record_watches (r, index, wm);
  COMMIT (index);
}

#ifdef USE_TSC
static gint64
clock_ns (void)
{
  Timespec t;
  clock_gettime (CLOCK_MONOTONIC_ID, &t);
  return t.sec * 1000000000ll + t.nsec;
}

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
  guint32 slot = t & (RING_CAPACITY - 1);
  guint32 n = 0;
#ifdef USE_TSC
  Record * r;
  gint64 base;
  gdouble rate;
  recalibrate ();
  base = shared.anchor_ns;
  rate = shared.ns_per_tick;
#endif
  if (max > RING_CAPACITY - slot)
    max = RING_CAPACITY - slot;
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
