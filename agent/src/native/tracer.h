/* The native tracer's data and hot-path macros, included by tracer.c (agent_build inlines it into the CModule
   source, since a CModule cannot include files of its own). The structs JavaScript and the host read are
   checked against the #define prelude of layout.ts (cPrelude): a mismatch does not compile. */

#ifndef STROBE_TRACER_H
#define STROBE_TRACER_H

#if !defined (RECORD_SIZE) || !defined (MAX_DEPTH) || !defined (SHARED_SIZE) || !defined (WATCH_SHIFT)
# error "tracer.c needs the #define prelude of agent/src/native/layout.ts (cPrelude)"
#endif

typedef struct { gint64 sec; gint64 nsec; } Timespec;
extern int clock_gettime (int clock, Timespec * ts);

typedef struct {
  guint64 ts;
  guint32 tid;
  guint32 func;
  guint16 kind;
  guint16 flags;
  guint32 parent;
  guint64 a[RECORD_ARG_COUNT];
} Record;

typedef struct {
  guint32 tid;
  guint32 depth;
  guint32 stack[MAX_DEPTH];
} ThreadStack;

typedef struct {
  guint64 window_start;
  guint32 calls;
  guint32 sampling;
  volatile guint32 sampled_out;
  volatile guint32 watch_mask; /* WATCH_* bits */
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
  gchar name[THREAD_NAME_TEXT_SIZE];
} ThreadName;

/* The fast path (fast_enter / fast_exit): a call's return address, replaced by the return thunk's, and what its exit
   needs, on a per-thread shadow stack. */
typedef struct {
  guint64 * slot; /* where the caller's `call` left the return address */
  guint64 ret; /* that return address */
  guint64 enter_ts;
  guint32 func;
  guint32 flags; /* Invocation flags */
  guint32 depth; /* the thread's ThreadStack depth at entry */
  guint32 restored; /* 1: the slot holds `ret` again while an unwinder walks the stack */
} ShadowEntry;

typedef struct {
  guint32 depth;
  guint32 capacity;
  guint32 rehook; /* 1: restored entries go back through the thunk at the thread's next fast call or return */
  guint32 reserved;
  ShadowEntry e[1]; /* capacity entries */
} Shadow;

/* What the enter thunk saved (fastpath.ts writes it): the argument registers, rax (varargs) and r10 (a static
   chain), xmm0-7, the function id, then the return address the caller pushed (the frame's `slot`). */
typedef struct {
  guint64 rdi, rsi, rdx, rcx, r8, r9, rax, r10;
  guint64 xmm[16];
  guint64 func;
  guint64 ret;
} FastFrame;

/* What the return thunk saved: xmm0, xmm1, rax, rdx; the returning frame's slot is just above. */
typedef struct {
  guint64 xmm0[2];
  guint64 xmm1[2];
  guint64 rax;
  guint64 rdx;
} RetFrame;

extern gpointer pthread_self (void);
extern gpointer calloc (gsize n, gsize size);
extern gpointer realloc (gpointer p, gsize size);
extern gssize write (gint fd, gconstpointer buf, gsize count);
extern void abort (void);
extern gint gettid (void);
extern gint pthread_key_create (guint32 * key, gpointer destructor);
extern gint pthread_key_delete (guint32 key);
extern gpointer pthread_getspecific (guint32 key);
extern gint pthread_setspecific (guint32 key, gconstpointer value);
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
  guint32 thread_key; /* a pthread key */
  guint32 reserved3;
  guint32 converted; /* ring sequence number up to which ticks are already nanoseconds */
  guint32 reserved2;
  gdouble ns_per_tick;
  guint64 anchor_ticks, rate_ticks, next_ticks;
  gint64 anchor_ns, rate_ns, next_ns;
  NativeWatch native[NATIVE_WATCH_SLOTS];
  void (* js_hook) (guint32 func, guint32 seq, Record * r, guint32 wm);
  Shadow ** shadows; /* per ThreadStack slot: its shadow stack, allocated by its first fast call */
  guint64 * originals; /* per function: where the fast path enters the original (Interceptor.replaceFast's) */
  guint64 ret_thunk; /* the return thunk: a fast call's return address on the stack */
} Shared;

extern Shared shared;

/* The structs as layout.ts describes them (JavaScript and the host read them at those offsets): a mismatch is
   an array of negative size, so the module does not compile. */
#define LAYOUT(name, cond) typedef char layout_##name[(cond) ? 1 : -1]
#define AT(type, field, offset) (G_STRUCT_OFFSET (type, field) == (glong) (offset))
LAYOUT (pointer, sizeof (gpointer) == POINTER_SIZE);
LAYOUT (record, sizeof (Record) == RECORD_SIZE && AT (Record, ts, RECORD_TS) && AT (Record, tid, RECORD_TID)
    && AT (Record, func, RECORD_FUNC) && AT (Record, kind, RECORD_KIND) && AT (Record, flags, RECORD_FLAGS)
    && AT (Record, parent, RECORD_PARENT) && AT (Record, a, RECORD_ARGS));
LAYOUT (committed, sizeof (guint32) == COMMITTED_SIZE);
LAYOUT (fstate, sizeof (FState) == FSTATE_SIZE && AT (FState, window_start, FSTATE_WINDOW_START)
    && AT (FState, calls, FSTATE_CALLS) && AT (FState, sampling, FSTATE_SAMPLING)
    && AT (FState, sampled_out, FSTATE_SAMPLED_OUT) && AT (FState, watch_mask, FSTATE_WATCH_MASK));
LAYOUT (native_watch, sizeof (NativeWatch) == NATIVE_WATCH_SIZE
    && AT (NativeWatch, address, NATIVE_WATCH_ADDRESS) && AT (NativeWatch, size, NATIVE_WATCH_WIDTH));
LAYOUT (native_slots, WATCH_NATIVE == (1u << NATIVE_WATCH_SLOTS) - 1u && NATIVE_WATCH_SLOTS <= RECORD_ARG_COUNT);
LAYOUT (invocation_flags, (FLAG_SAMPLED | FLAG_NATIVE_WATCH | FLAG_JS_WATCH | FLAG_FOLLOWED | FLAG_EXT | FLAG_UNFOLLOWED)
    < (1u << WATCH_SHIFT) && ((WATCH_NATIVE | WATCH_JS_WORK | WATCH_CAPTURE) << WATCH_SHIFT) < INVOCATION_SKIP);
LAYOUT (capture_slots, RECORD_ARG_COUNT <= 8); /* KIND_XMM: xmm0..xmm7 are the argument registers */
LAYOUT (thread_name, sizeof (ThreadName) == THREAD_NAME_SIZE && AT (ThreadName, tid, THREAD_NAME_TID)
    && AT (ThreadName, name, THREAD_NAME_TEXT));
LAYOUT (thread_stack, sizeof (ThreadStack) == THREAD_STACK_SIZE);
LAYOUT (fast_frame, sizeof (FastFrame) == 208 && G_STRUCT_OFFSET (FastFrame, xmm) == 64
    && G_STRUCT_OFFSET (FastFrame, func) == 192 && sizeof (RetFrame) == 48); /* fastpath.ts's thunks */
LAYOUT (shared, sizeof (Shared) <= SHARED_SIZE && AT (Shared, ring, SHARED_RING)
    && AT (Shared, committed, SHARED_COMMITTED) && AT (Shared, fstate, SHARED_FSTATE)
    && AT (Shared, names, SHARED_NAMES) && AT (Shared, threads, SHARED_THREADS) && AT (Shared, head, SHARED_HEAD)
    && AT (Shared, tail, SHARED_TAIL) && AT (Shared, dropped, SHARED_DROPPED)
    && AT (Shared, hot_threshold, SHARED_HOT)
    && AT (Shared, sample_every, SHARED_SAMPLE_EVERY) && AT (Shared, names_head, SHARED_NAMES_HEAD)
    && AT (Shared, thread_count, SHARED_THREAD_COUNT) && AT (Shared, follow_limit, SHARED_FOLLOW_LIMIT));
LAYOUT (powers_of_two, (RING_CAPACITY & (RING_CAPACITY - 1)) == 0 && (NAMES_CAPACITY & (NAMES_CAPACITY - 1)) == 0);

#define WINDOW_NS 1000000000ull
#define CLOCK_MONOTONIC_ID 1
#define INVOCATION_RECORD_FLAGS ((1u << WATCH_SHIFT) - 1u) /* Invocation.flags bits that go into a record */

/* TinyCC inlines nothing: the hot path uses macros, not functions. */
#define RDTSC(v) do { guint32 lo_, hi_; __asm__ __volatile__ ("rdtsc" : "=a" (lo_), "=d" (hi_)); \
    (v) = ((guint64) hi_ << 32) | lo_; } while (0)
#ifdef USE_TSC
/* Raw TSC ticks (constant and synchronised: the kernel's clocksource is "tsc"); drain() turns them into
   CLOCK_MONOTONIC nanoseconds before a batch leaves. Half the cost of clock_gettime. */
# define NOW(v) RDTSC (v)
#else
# define NOW(v) do { Timespec t_; clock_gettime (CLOCK_MONOTONIC_ID, &t_); \
    (v) = (guint64) t_.sec * 1000000000ull + (guint64) t_.nsec; } while (0)
#endif
/* Atomics through a register operand: TinyCC gets memory operands on extern symbols wrong. */
#define FETCH_ADD(p, v, out) \
    __asm__ __volatile__ ("lock; xaddl %0, (%1)" : "=r" (out) : "r" (p), "0" (v) : "memory")
#define ATOMIC_INC(p) __asm__ __volatile__ ("lock; incl (%0)" : : "r" (p) : "memory")
/* Claims n consecutive ring slots, the call's record in the last: r is NULL (and the loss counted) when the
   ring is full. */
#define RESERVE(r, index, n) do { \
    if (shared.head - shared.tail >= RING_CAPACITY - RING_HEADROOM) { ATOMIC_INC (&shared.dropped); (r) = NULL; } \
    else { FETCH_ADD (&shared.head, (n), index); (index) += (n) - 1; \
      (r) = &shared.ring[(index) & (RING_CAPACITY - 1)]; } } while (0)
/* x86 keeps stores in order: the record is complete before its slot is marked. */
#define COMMIT(index) (((volatile guint32 *) shared.committed)[(index) & (RING_CAPACITY - 1)] = (index) + 1)
#define TAGGED_TID(tid) ((ThreadStack *) GSIZE_TO_POINTER (((gsize) (tid) << 1) | 1))

#endif
