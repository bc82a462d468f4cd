/* The native tracer's fast path: Interceptor.replaceFast sends a traced function to its enter thunk (fastpath.ts),
   which saves the argument registers, calls fast_enter, restores them and jumps to the original. fast_enter records
   the entry (recording.h, as the attach path does) and pushes, on the thread's shadow stack, the caller's return
   address, which it replaces with the return thunk's: the function returns into the thunk, which calls fast_exit
   for the exit record and the return address to jump to. No fxsave, no Frida bookkeeping per call.

   Built apart from tracer.c, which keeps the attach path, the drain and the clocks: agent_build compiles this file
   with gcc -O2 into a shared object that CModule loads (native_build.py), or the agent hands the source to TinyCC
   when there is none. Either way it sees the same prelude and shares tracer.c's memory (the `shared` area). It
   uses no Frida API: everything it calls is libc's, passed in by cmodule.ts.

   The shadow stack: a call's entry holds where its return address was (`slot`), that address, and what its exit
   record needs. A return into the thunk is matched by its slot, newest first, so entries left by frames that
   never returned (longjmp, exceptions) are dropped at the next return below them. Unwinders: shadow_restore puts
   the real return addresses back before one walks the calling thread's stack; shadow_rehook sends the frames
   still alive back through the thunk afterwards (unwinding.ts, common/stacks.ts). */

#include <glib.h>
#include "tracer.h"
#include "recording.h"

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

static void rehook (Shadow * sh, guint64 sp);

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
  if (sh != NULL && sh->rehook)
    rehook (sh, GPOINTER_TO_SIZE (&f->ret)); /* after a backtrace: this call's frame is below every live one */
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
      "of its caller (the thread switched stacks?): set trace.fastPath to 0 for this program\n";
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
  if (sh->rehook)
    rehook (sh, GPOINTER_TO_SIZE (slot)); /* after a backtrace: the frames above this one are alive */
  record_exit (&inv, ts, f->rax, f->rdx, f->xmm0);
  return ret;
}

/* The calling thread's shadow stack, or NULL. */
static Shadow *
own_shadow (void)
{
  ThreadStack * st = (ThreadStack *) pthread_getspecific (shared.thread_key);
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

/* The restored calls of a thread whose stack pointer is at `sp`: those whose frames are gone (their return address
   at or below sp) leave the shadow stack without an exit; the others return through the thunk again. */
static void
rehook (Shadow * sh, guint64 sp)
{
  guint32 i, k = 0;
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
  sh->rehook = 0;
}

/* After the unwinder is done, the calling thread's stack pointer at `sp`: where a C++ exception is caught
   (__cxa_begin_catch), after a pause or a backtrace taken by the agent. */
void
shadow_rehook (guint64 sp)
{
  Shadow * sh = own_shadow ();
  if (sh != NULL)
    rehook (sh, sp);
}

/* Called by the unwinder thunk (fastpath.ts) on entry to libgcc's unwinder: `kind` 1 for an exception (its catch
   rehooks: shadow_rehook), 2 for _Unwind_Backtrace (the thread's next fast call or return rehooks: no code of
   ours may run on the way out of the unwinder, whose first frame is its caller's). */
void
shadow_unwinding (guint64 kind)
{
  Shadow * sh = own_shadow ();
  shadow_restore ();
  if (sh != NULL && kind == 2)
    sh->rehook = 1;
}

void
fast_config (Shadow ** shadows, guint64 * originals, guint64 ret_thunk)
{
  shared.shadows = shadows;
  shared.originals = originals;
  shared.ret_thunk = ret_thunk;
}
