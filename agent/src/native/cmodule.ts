// The native tracer's two CModules, built behind the #define prelude of layout.ts and linked against the shared
// area tracer.ts allocated and the libc functions they call:
// - tracer.c (TinyCC, with Frida's headers): the attach path's listeners, the drain, the clocks;
// - fastpath.c (the fast path, per traced call): the shared object gcc built when the agent was built
//   (instrument/native_build.py), or else the same source compiled by TinyCC.
//
// `generated/*_c.ts` and `generated/fastpath_so.ts` are not in the source tree: agent_build.py writes them into the
// copy of the agent it compiles (TRACER_C, FASTPATH_C: the sources with their includes inlined; FASTPATH_SO: the
// shared object per clock as hex, empty without gcc).

import { emit } from "../common/protocol.js";
import { FASTPATH_C } from "./generated/fastpath_c.js";
import { FASTPATH_SO } from "./generated/fastpath_so.js";
import { TRACER_C } from "./generated/tracer_c.js";
import { cPrelude } from "./layout.js";

export interface TracerModules {
  tracer: CModule;
  fast: CModule;
}

export function createTracerModules(shared: NativePointer): TracerModules {
  const tsc = tscIsClocksource();
  const libc = (name: string): NativePointer => Module.getGlobalExportByName(name);
  const symbols: CSymbols = {
    shared,
    clock_gettime: libc("clock_gettime"),
    pthread_self: libc("pthread_self"),
    pthread_getname_np: libc("pthread_getname_np"),
    pthread_key_create: libc("pthread_key_create"),
    pthread_key_delete: libc("pthread_key_delete"),
    pthread_getspecific: libc("pthread_getspecific"),
    pthread_setspecific: libc("pthread_setspecific"),
    calloc: libc("calloc"),
    realloc: libc("realloc"),
    write: libc("write"),
    abort: libc("abort"),
    gettid: libc("gettid"),
  };
  const tracer = new CModule(cPrelude(tsc) + TRACER_C, symbols);
  const built = tsc ? FASTPATH_SO.tsc : FASTPATH_SO.plain;
  if (built !== "") {
    try {
      return { tracer, fast: new CModule(hexBytes(built), symbols) };
    } catch (e) {
      emit({ type: "log", level: "warning", message: `the fast path's gcc build did not load (${e}): TinyCC's used` });
    }
  }
  return { tracer, fast: new CModule(cPrelude(tsc) + FASTPATH_C, symbols) };
}

function hexBytes(hex: string): ArrayBuffer {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) {
    bytes[i] = parseInt(hex.substring(2 * i, 2 * i + 2), 16);
  }
  return bytes.buffer;
}

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
