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
#include "tracer.h"
#include "recording.h"

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
  pthread_key_create (&shared.thread_key, NULL);
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
  pthread_key_delete (shared.thread_key);
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
