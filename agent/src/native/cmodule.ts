// The native tracer's CModule: tracer.c compiled by Frida behind the #define prelude of layout.ts, linked
// against the shared area tracer.ts allocated and the libc functions it calls.
//
// `generated/tracer_c.ts` is not in the source tree: agent_build.py writes it into the copy of the agent it
// compiles, holding tracer.c (with tracer.h inlined) as the string TRACER_C.

import { TRACER_C } from "./generated/tracer_c.js";
import { cPrelude } from "./layout.js";

export function createTracerModule(shared: NativePointer): CModule {
  return new CModule(cPrelude(tscIsClocksource()) + TRACER_C, {
    shared,
    clock_gettime: Module.getGlobalExportByName("clock_gettime"),
    pthread_self: Module.getGlobalExportByName("pthread_self"),
    pthread_getname_np: Module.getGlobalExportByName("pthread_getname_np"),
    calloc: Module.getGlobalExportByName("calloc"),
    realloc: Module.getGlobalExportByName("realloc"),
    write: Module.getGlobalExportByName("write"),
    abort: Module.getGlobalExportByName("abort"),
    gettid: Module.getGlobalExportByName("gettid"),
  });
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
