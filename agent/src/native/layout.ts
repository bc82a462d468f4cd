// The native tracer's memory layout, in one place: every size, offset and bit that the CModule (tracer.c),
// the JavaScript reading its memory (tracer.ts, follow.ts) and the host decoding trace records
// (src/strobe/instrument/records.py) must agree on. The C gets them as #defines from cPrelude() and checks its
// structs against them when it compiles; tests/instrument compares them with records.py and compiles tracer.c
// with gcc under this prelude.
//
// Pure data: no Frida API in here, so tests can evaluate this module with plain node. Values are unsigned
// 32-bit integers (the prelude writes them with a `u` suffix).

// x86-64 only: the CModule reads the System V argument registers (tscIsClocksource also checks for x64).
export const POINTER_SIZE = 8;

// ---- Trace records: RECORD_SIZE bytes, little endian ----
export const RECORD_SIZE = 72;
export const RECORD_TS = 0; // u64 CLOCK_MONOTONIC ns (TSC ticks until drain() converts them)
export const RECORD_TID = 8; // u32 thread id
export const RECORD_FUNC = 12; // u32 function id
export const RECORD_KIND = 16; // u16 KIND_*
export const RECORD_FLAGS = 18; // u16 FLAG_*
export const RECORD_PARENT = 20; // u32 sequence number of the caller's enter record, NO_PARENT: none
export const RECORD_ARGS = 24; // u64[RECORD_ARG_COUNT]: enter: argument registers; exit: [0] rax, [1] duration,
// and with FLAG_EXT [2] rdx, [3] xmm0, [4] xmm1 (low 8 bytes)
export const RECORD_ARG_COUNT = 6;
export const RECORD_ARG_SIZE = 8;

export const KIND_ENTER = 1;
export const KIND_EXIT = 2;
export const KIND_WATCH = 3; // native watch values of the record just after it; flags = slot mask
// Argument words a function's signature needs beyond the integer registers (WATCH_CAPTURE_*): records placed
// before their call's enter record (and its KIND_WATCH record), committed first, same tid and func.
export const KIND_XMM = 4; // a[i]: the low 8 bytes of xmm<i> (float/double arguments; i < RECORD_ARG_COUNT)
export const KIND_STACK = 5; // a[i]: the 8 bytes at rsp + 8 + 8 * i on entry (arguments passed on the stack)

export const FLAG_SAMPLED = 1; // captured while the function was sampled
export const FLAG_NATIVE_WATCH = 2; // the record just before is a KIND_WATCH record
export const FLAG_JS_WATCH = 4; // JavaScript watch values travel under this record's sequence number
export const FLAG_FOLLOWED = 8; // followed pointer values travel under this record's sequence number
export const FLAG_EXT = 16; // enter: KIND_XMM/KIND_STACK records precede it; exit: a[2..4] hold rdx, xmm0, xmm1
export const FLAG_UNFOLLOWED = 32; // its pointers were not followed: past the function's follow limit this second

export const NO_PARENT = 0xffffffff;

// ---- The ring: RING_CAPACITY records, and per slot a u32 "committed" mark (sequence number + 1) ----
export const RING_CAPACITY = 1 << 18; // a power of two
export const RING_HEADROOM = 1024; // slots kept free so racing reservations never overrun the reader
export const COMMITTED_SIZE = 4;

// ---- Per-function state (FState), indexed by function id ----
export const MAX_FUNCTIONS = 1 << 16;
export const FSTATE_SIZE = 32; // padded so a function's state never straddles two cache lines
export const FSTATE_WINDOW_START = 0; // u64 start of the current one-second window (clock ticks)
export const FSTATE_CALLS = 8; // u32 calls in the window
export const FSTATE_SAMPLING = 12; // u32 non-zero while sampled
export const FSTATE_SAMPLED_OUT = 16; // u32 calls skipped by sampling, ever
export const FSTATE_WATCH_MASK = 20; // u32 WATCH_* bits

// ---- Watch mask bits (FState.watch_mask) ----
export const NATIVE_WATCH_SLOTS = 4;
export const WATCH_NATIVE = 0x0f; // bit `slot`: that native watch is read for this function
export const WATCH_JS = 0x10; // JavaScript watches apply
export const WATCH_FOLLOW_ENTER = 0x20; // arguments are followed on entry
export const WATCH_FOLLOW_EXIT = 0x40; // the return value is followed on exit
export const WATCH_FOLLOW = WATCH_FOLLOW_ENTER | WATCH_FOLLOW_EXIT;
export const WATCH_JS_WORK = WATCH_JS | WATCH_FOLLOW; // bits that call the JavaScript hook
// What the function's signature needs captured besides the integer registers (set with its argument plan):
export const WATCH_CAPTURE_XMM = 0x80; // a KIND_XMM record on entry
export const WATCH_CAPTURE_STACK = 0x100; // a KIND_STACK record on entry
export const WATCH_CAPTURE_RETURN = 0x200; // rdx, xmm0 and xmm1 in the exit record
export const WATCH_CAPTURE = WATCH_CAPTURE_XMM | WATCH_CAPTURE_STACK | WATCH_CAPTURE_RETURN;
// What on_enter leaves for on_leave (Invocation.flags): record flags in the low bits, the call's watch mask
// from WATCH_SHIFT on, or INVOCATION_SKIP for a call sampling skips.
export const WATCH_SHIFT = 8;
export const INVOCATION_SKIP = 0x80000000;

// ---- Native watch slots (NativeWatch) ----
export const NATIVE_WATCH_SIZE = 16;
export const NATIVE_WATCH_ADDRESS = 0; // u64
export const NATIVE_WATCH_WIDTH = 8; // u32: 1, 2, 4 or 8 bytes

// ---- Thread names noted by the C side (ThreadName), a ring of NAMES_CAPACITY ----
export const NAMES_CAPACITY = 4096; // a power of two
export const THREAD_NAME_SIZE = 20;
export const THREAD_NAME_TID = 0; // u32
export const THREAD_NAME_TEXT = 4; // char[THREAD_NAME_TEXT_SIZE], NUL-terminated unless full
export const THREAD_NAME_TEXT_SIZE = 16;

// ---- Per-thread call stacks (ThreadStack) ----
export const MAX_THREADS = 4096; // threads with a call stack; later ones are traced without parents
export const MAX_DEPTH = 126;
export const THREAD_STACK_SIZE = 8 + 4 * MAX_DEPTH; // u32 tid, u32 depth, u32 stack[MAX_DEPTH]

// ---- The area shared by JavaScript and the CModule (Shared); fields JavaScript touches ----
export const SHARED_RING = 0; // pointers to the areas JavaScript allocates
export const SHARED_COMMITTED = POINTER_SIZE;
export const SHARED_FSTATE = 2 * POINTER_SIZE;
export const SHARED_NAMES = 3 * POINTER_SIZE;
export const SHARED_THREADS = 4 * POINTER_SIZE;
export const SHARED_HEAD = 5 * POINTER_SIZE; // u32 next sequence number to reserve
export const SHARED_TAIL = SHARED_HEAD + 4; // u32 next sequence number to drain
export const SHARED_DROPPED = SHARED_HEAD + 8; // s32 records lost to a full ring
export const SHARED_HOT = SHARED_HEAD + 12; // u32 calls per second from which a function is sampled
export const SHARED_SAMPLE_EVERY = SHARED_HEAD + 16; // u32
export const SHARED_NAMES_HEAD = SHARED_HEAD + 20; // u32 thread names noted so far
export const SHARED_THREAD_COUNT = SHARED_HEAD + 24; // u32
export const SHARED_FOLLOW_LIMIT = SHARED_HEAD + 28; // u32 calls per window whose pointers are followed
export const SHARED_SIZE = SHARED_HEAD + 256; // bytes allocated; the C checks its struct fits

// Everything the C side uses, under the same names.
export const C_LAYOUT: Record<string, number> = {
  POINTER_SIZE,
  RECORD_SIZE, RECORD_TS, RECORD_TID, RECORD_FUNC, RECORD_KIND, RECORD_FLAGS, RECORD_PARENT, RECORD_ARGS,
  RECORD_ARG_COUNT, RECORD_ARG_SIZE,
  KIND_ENTER, KIND_EXIT, KIND_WATCH, KIND_XMM, KIND_STACK,
  FLAG_SAMPLED, FLAG_NATIVE_WATCH, FLAG_JS_WATCH, FLAG_FOLLOWED, FLAG_EXT, FLAG_UNFOLLOWED,
  NO_PARENT,
  RING_CAPACITY, RING_HEADROOM, COMMITTED_SIZE,
  MAX_FUNCTIONS, FSTATE_SIZE, FSTATE_WINDOW_START, FSTATE_CALLS, FSTATE_SAMPLING, FSTATE_SAMPLED_OUT,
  FSTATE_WATCH_MASK,
  NATIVE_WATCH_SLOTS, WATCH_NATIVE, WATCH_JS, WATCH_FOLLOW_ENTER, WATCH_FOLLOW_EXIT, WATCH_FOLLOW, WATCH_JS_WORK,
  WATCH_CAPTURE_XMM, WATCH_CAPTURE_STACK, WATCH_CAPTURE_RETURN, WATCH_CAPTURE, WATCH_SHIFT, INVOCATION_SKIP,
  NATIVE_WATCH_SIZE, NATIVE_WATCH_ADDRESS, NATIVE_WATCH_WIDTH,
  NAMES_CAPACITY, THREAD_NAME_SIZE, THREAD_NAME_TID, THREAD_NAME_TEXT, THREAD_NAME_TEXT_SIZE,
  MAX_THREADS, MAX_DEPTH, THREAD_STACK_SIZE,
  SHARED_RING, SHARED_COMMITTED, SHARED_FSTATE, SHARED_NAMES, SHARED_THREADS, SHARED_HEAD, SHARED_TAIL,
  SHARED_DROPPED, SHARED_HOT, SHARED_SAMPLE_EVERY, SHARED_NAMES_HEAD, SHARED_THREAD_COUNT, SHARED_FOLLOW_LIMIT,
  SHARED_SIZE,
};

// The #define lines put in front of tracer.c. `useTsc`: the hot path reads the TSC instead of clock_gettime.
export function cPrelude(useTsc: boolean): string {
  const lines = ["/* Generated from agent/src/native/layout.ts (cPrelude). */"];
  if (useTsc) {
    lines.push("#define USE_TSC 1");
  }
  for (const [name, value] of Object.entries(C_LAYOUT)) {
    if (!Number.isInteger(value) || value < 0 || value > 0xffffffff) {
      throw new Error(`layout constant ${name} = ${value} is not an unsigned 32-bit integer`);
    }
    lines.push(`#define ${name} ${value}u`);
  }
  return lines.join("\n") + "\n";
}
