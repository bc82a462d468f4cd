/* The native tracer's recording, shared by the attach path (tracer.c, TinyCC) and the fast path (fastpath.c, gcc
   or TinyCC): watches, captures, the per-thread call stacks, sampling, and the enter and exit records. Static
   functions, so each module has its own copy working on the one shared area; agent_build inlines this file into
   each. Needs tracer.h first. */

#ifndef STROBE_RECORDING_H
#define STROBE_RECORDING_H

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
    guint32 slot, i_;
    FETCH_ADD (&shared.names_head, 1u, slot);
    ThreadName * entry = &shared.names[slot & (NAMES_CAPACITY - 1)];
    entry->name[0] = 0;
    pthread_getname_np (pthread_self (), entry->name, sizeof (entry->name));
    entry->tid = tid;
    FETCH_ADD (&shared.thread_count, 1u, i_);
    i = i_;
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
  pthread_setspecific (shared.thread_key, st);
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
  ThreadStack * st = (ThreadStack *) pthread_getspecific (shared.thread_key);
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

#endif
