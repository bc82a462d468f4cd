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
   the highest of them. `xmm`: the caller's xmm0-7 as saved on entry, 16 bytes each; `sp`: the stack pointer on
   entry (the return address), the stack arguments above it. */
static void
record_capture (Record * r, guint32 last, guint32 wm, const guint64 * xmm, const guint64 * sp)
{
  Record * e;
  guint32 i;
  if ((wm & WATCH_CAPTURE_STACK) != 0)
  {
    e = capture_slot (r, last, KIND_STACK);
    for (i = 0; i != RECORD_ARG_COUNT; i++)
      e->a[i] = sp[1 + i];
    COMMIT (last);
    last--;
  }
  if ((wm & WATCH_CAPTURE_XMM) != 0)
  {
    e = capture_slot (r, last, KIND_XMM);
    for (i = 0; i != RECORD_ARG_COUNT; i++)
      e->a[i] = xmm[2 * i];
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
thread_register (guint32 tid)
{
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
    if (shared.shadows != NULL && shared.shadows[i] != NULL)
      shared.shadows[i]->depth = 0;
  }
  st = i < MAX_THREADS ? &shared.threads[i] : TAGGED_TID (tid);
  gum_tls_key_set_value (shared.thread_key, st);
  return st;
}

/* Hot-function sampling, at a call's entry: 1 when the call is recorded (`*flags` gets FLAG_SAMPLED while the
   function is sampled), 0 when sampling skips it. `*calls`: the function's calls in this window. */
static guint32
sample (FState * fs, guint64 ts, guint32 * calls, guint32 * flags)
{
  guint32 n;
  if (ts - fs->window_start >= shared.window)
  {
    fs->sampling = fs->calls >= shared.hot_threshold && ts - fs->window_start < 2 * shared.window;
    fs->window_start = ts;
    fs->calls = 0;
  }
  n = ++fs->calls;
  *calls = n;
  *flags = 0;
  if (n >= shared.hot_threshold)
    fs->sampling = 1;
  if (fs->sampling)
  {
    if (n % shared.sample_every != 0)
      return 0;
    *flags = FLAG_SAMPLED;
  }
  return 1;
}

/* The calling thread's stack, or NULL with *tid set for a thread past MAX_THREADS. */
static ThreadStack *
current_thread (guint32 * tid)
{
  ThreadStack * st = (ThreadStack *) gum_tls_key_get_value (shared.thread_key);
  if (st == NULL)
    st = thread_register ((guint32) gettid ());
  if ((GPOINTER_TO_SIZE (st) & 1) != 0)
  {
    *tid = (guint32) (GPOINTER_TO_SIZE (st) >> 1);
    return NULL;
  }
  *tid = st->tid;
  return st;
}

/* A recorded call's entry: its enter record (and the capture and watch records before it), its place on the
   thread's stack. `inv` gets what the exit needs; inv->flags holds the sampling flags on the way in. `gp`: rdi,
   rsi, rdx, rcx, r8, r9; `xmm` and `sp` as for record_capture. */
static void
record_enter (Invocation * inv, FState * fs, guint32 calls, const guint64 * gp, const guint64 * xmm,
    const guint64 * sp)
{
  Record * r;
  ThreadStack * st = inv->st;
  guint32 index = 0, parent = NO_PARENT, depth, wm, native, ext, i;

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
  r->ts = inv->enter_ts;
  r->tid = inv->tid;
  r->func = inv->func;
  r->kind = KIND_ENTER;
  r->flags = (guint16) (inv->flags & INVOCATION_RECORD_FLAGS);
  r->parent = parent;
  for (i = 0; i != 6; i++)
    r->a[i] = gp[i]; /* System V x86-64: the first six integer arguments */
  if (ext != 0)
    record_capture (r, index - 1u - native, wm, xmm, sp);
  if (wm != 0)
    record_watches (r, index, wm);
  COMMIT (index);
}

/* A recorded call's exit, from what its entry left in `inv`: `ret` rax, rdx; `xmm`: xmm0 and xmm1, 16 bytes
   each. */
static void
record_exit (const Invocation * inv, guint64 ts, guint64 rax, guint64 rdx, const guint64 * xmm)
{
  ThreadStack * st = inv->st;
  Record * r;
  guint32 index = 0, parent = NO_PARENT, depth, wm;

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
  r->a[0] = rax;
  r->a[1] = ts - inv->enter_ts; /* in ticks until drain() */
  if ((wm & WATCH_CAPTURE_RETURN) != 0)
  {
    /* The second integer return register and the two SSE ones (the low 8 bytes of each). */
    r->a[2] = rdx;
    r->a[3] = xmm[0];
    r->a[4] = xmm[2];
    r->flags |= FLAG_EXT;
  }
  if (wm != 0)
    record_watches (r, index, wm);
  COMMIT (index);
}

/* ---- The Interceptor.attach path: Frida's trampolines around on_enter / on_leave ---- */

void
on_enter (GumInvocationContext * ic)
{
  guint64 ts, gp[6];
  Invocation * inv;
  FState * fs;
  GumCpuContext * cpu;
  guint32 func, calls, flags;

  NOW (ts);
  inv = GUM_IC_GET_INVOCATION_DATA (ic, Invocation);
  func = GPOINTER_TO_UINT (gum_invocation_context_get_listener_function_data (ic));
  fs = &shared.fstate[func];
  inv->enter_ts = ts;
  inv->func = func;
  if (!sample (fs, ts, &calls, &flags))
  {
    inv->flags = INVOCATION_SKIP;
    ATOMIC_INC (&fs->sampled_out);
    return;
  }
  inv->flags = flags;
  inv->st = current_thread (&inv->tid);
  cpu = ic->cpu_context;
  gp[0] = cpu->rdi;
  gp[1] = cpu->rsi;
  gp[2] = cpu->rdx;
  gp[3] = cpu->rcx;
  gp[4] = cpu->r8;
  gp[5] = cpu->r9;
  /* Frida's trampoline saved the caller's xmm registers (fxsave): cpu->xmm points at them. */
  record_enter (inv, fs, calls, gp, (const guint64 *) cpu->xmm, (const guint64 *) GSIZE_TO_POINTER (cpu->rsp));
}

void
on_leave (GumInvocationContext * ic)
{
  guint64 ts;
  Invocation * inv;

  NOW (ts);
  inv = GUM_IC_GET_INVOCATION_DATA (ic, Invocation);
  if (inv->flags == INVOCATION_SKIP)
  {
    ATOMIC_INC (&shared.fstate[inv->func].sampled_out);
    return;
  }
  record_exit (inv, ts, ic->cpu_context->rax, ic->cpu_context->rdx, (const guint64 *) ic->cpu_context->xmm);
}

/* ---- The fast path: Interceptor.replaceFast sends a traced function to its enter thunk (fastpath.ts), which
   saves the argument registers, calls fast_enter, restores them and jumps to the original. fast_enter records the
   entry and, on the thread's shadow stack, the caller's return address, which it replaces with the return thunk's:
   the function returns into the thunk, which calls fast_exit for the exit record and the return address to jump
   to. No fxsave, no Frida bookkeeping: ~3x cheaper than Frida's trampolines. ---- */

#define SHADOW_FIRST 256u
#define SHADOW_MAX 65536u

/* The thread's shadow stack with room for one more entry, or NULL (past MAX_THREADS, out of memory, or
   SHADOW_MAX frames deep: that call is recorded without its exit). */
static Shadow *
shadow_room (ThreadStack * st)
{
  guint32 i;
  Shadow * sh, * grown;
  if (st == NULL)
    return NULL;
  i = (guint32) (st - shared.threads);
  sh = shared.shadows[i];
  if (sh == NULL)
  {
    sh = (Shadow *) calloc (1, sizeof (Shadow) + (SHADOW_FIRST - 1) * sizeof (ShadowEntry));
    if (sh == NULL)
      return NULL;
    sh->capacity = SHADOW_FIRST;
    shared.shadows[i] = sh;
  }
  if (sh->depth == sh->capacity)
  {
    if (sh->capacity >= SHADOW_MAX)
      return NULL;
    grown = (Shadow *) realloc (sh, sizeof (Shadow) + (2 * sh->capacity - 1) * sizeof (ShadowEntry));
    if (grown == NULL)
      return NULL;
    grown->capacity *= 2;
    shared.shadows[i] = sh = grown;
  }
  return sh;
}

guint64
fast_enter (FastFrame * f)
{
  guint64 ts;
  guint32 func = (guint32) f->func, calls, flags;
  FState * fs = &shared.fstate[func];
  Invocation inv;
  Shadow * sh;
  ShadowEntry * e;

  NOW (ts);
  if (!sample (fs, ts, &calls, &flags))
  {
    guint32 ignored;
    FETCH_ADD (&fs->sampled_out, 2u, ignored); /* its enter and its exit */
    (void) ignored;
    return shared.originals[func];
  }
  inv.enter_ts = ts;
  inv.func = func;
  inv.flags = flags;
  inv.depth = 0;
  inv.st = current_thread (&inv.tid);
  sh = shadow_room (inv.st);
  record_enter (&inv, fs, calls, &f->rdi, f->xmm, &f->ret);
  if (sh != NULL)
  {
    e = &sh->e[sh->depth++];
    e->slot = &f->ret;
    e->ret = f->ret;
    e->enter_ts = ts;
    e->func = func;
    e->flags = inv.flags;
    e->depth = inv.depth;
    e->restored = 0;
    f->ret = shared.ret_thunk;
  }
  return shared.originals[func];
}

/* A return into the thunk with no call of this thread's returning there: the return address is lost. */
static void
lost (void)
{
  static const gchar message[] = "strobe: a traced function returned into Strobe's return thunk with no record "
      "of its caller (the thread switched stacks?): set trace.fastPath to false for this program\n";
  write (2, message, sizeof (message) - 1);
  abort ();
}

guint64
fast_exit (RetFrame * f)
{
  guint64 ts, ret;
  guint64 * slot = (guint64 *) (f + 1) - 1; /* the returning frame's return address was here */
  guint32 i, j, k;
  ThreadStack * st;
  Shadow * sh;
  ShadowEntry * e;
  Invocation inv;

  NOW (ts);
  st = current_thread (&inv.tid);
  sh = st != NULL ? shared.shadows[st - shared.threads] : NULL;
  if (sh == NULL)
    lost ();
  /* The newest entry for this slot is the returning call. Entries above it are frames that never returned
     (longjmp, an exception): dropped when they lie deeper on the stack, kept when they lie above it (another
     stack of this thread's: a signal handler's alternate stack left by siglongjmp, say). */
  for (i = sh->depth; i != 0 && sh->e[i - 1].slot != slot; i--)
    ;
  if (i == 0)
    lost ();
  e = &sh->e[i - 1];
  ret = e->ret;
  inv.enter_ts = e->enter_ts;
  inv.func = e->func;
  inv.flags = e->flags;
  inv.depth = e->depth;
  inv.st = st;
  for (k = i - 1, j = i; j != sh->depth; j++)
  {
    if (sh->e[j].slot > slot)
      sh->e[k++] = sh->e[j];
  }
  sh->depth = k;
  record_exit (&inv, ts, f->rax, f->rdx, f->xmm0);
  return ret;
}

/* The calling thread's shadow stack, or NULL. */
static Shadow *
own_shadow (void)
{
  ThreadStack * st = (ThreadStack *) gum_tls_key_get_value (shared.thread_key);
  if (st == NULL || (GPOINTER_TO_SIZE (st) & 1) != 0 || shared.shadows == NULL)
    return NULL;
  return shared.shadows[st - shared.threads];
}

/* Before an unwinder walks the calling thread's stack (an exception, a backtrace, a pause or a crash report): the
   return addresses the fast path replaced are put back, so every frame is where its unwind information says. */
void
shadow_restore (void)
{
  Shadow * sh = own_shadow ();
  guint32 i;
  if (sh == NULL)
    return;
  for (i = 0; i != sh->depth; i++)
  {
    ShadowEntry * e = &sh->e[i];
    if (!e->restored && *e->slot == shared.ret_thunk)
      *e->slot = e->ret;
    e->restored = 1;
  }
}

/* After the unwinder is done, the calling thread's stack pointer at `sp`: the calls whose frames were unwound
   (their return address at or below sp) leave the shadow stack without an exit; the others return through the
   thunk again. */
void
shadow_rehook (guint64 sp)
{
  Shadow * sh = own_shadow ();
  guint32 i, k = 0;
  if (sh == NULL)
    return;
  for (i = 0; i != sh->depth; i++)
  {
    ShadowEntry * e = &sh->e[i];
    if (e->restored)
    {
      if (GPOINTER_TO_SIZE (e->slot) <= sp || *e->slot != e->ret)
        continue; /* unwound */
      *e->slot = shared.ret_thunk;
      e->restored = 0;
    }
    sh->e[k++] = *e;
  }
  sh->depth = k;
}

void
fast_config (Shadow ** shadows, guint64 * originals, guint64 ret_thunk)
{
  shared.shadows = shadows;
  shared.originals = originals;
  shared.ret_thunk = ret_thunk;
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
