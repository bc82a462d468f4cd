// Watches read in JavaScript: pointer chains, structs, C strings and `expr` expressions — whatever the
// CModule cannot read by itself (it reads up to 4 scalars at fixed addresses natively, see tracer.c).
// The CModule calls `onRecord` for a call of a function some JS watch applies to, before the record is
// committed; the values are kept by the record's sequence number and leave with the batch holding it.

import { readRecipe } from "../common/memory.js";
import { WatchError } from "../common/protocol.js";
import { JsWatchSpec } from "../common/requests.js";

const MAX_PENDING = 65536; // records with values waiting to be drained; older ones are dropped (counted)

interface JsWatch {
  id: number;
  spec: JsWatchSpec;
  evaluate?: () => unknown;
  funcs: Set<number> | null;
}

// A value as the host decodes it: h = bytes (hex) with s = C strings behind char* offsets; v = an
// expression's JSON value; e = why nothing could be read.
export type WatchValue = { h: string; s?: Record<string, string | null> } | { v: unknown } | { e: string };

function hex(bytes: ArrayBuffer): string {
  const view = new Uint8Array(bytes);
  let out = "";
  for (let i = 0; i < view.length; i++) {
    out += (view[i] < 16 ? "0" : "") + view[i].toString(16);
  }
  return out;
}

function jsonable(value: unknown): unknown {
  if (value instanceof NativePointer) {
    return value.toString();
  }
  if (value instanceof Int64 || value instanceof UInt64) {
    return value.toString();
  }
  if (value instanceof ArrayBuffer) {
    return hex(value);
  }
  if (typeof value === "bigint") {
    return value.toString();
  }
  if (value === undefined || typeof value === "function") {
    return null;
  }
  return value;
}

export class JsWatches {
  private watches: JsWatch[] = [];
  private pending = new Map<number, Record<string, WatchValue>>();
  dropped = 0;

  // Replace the watch list; returns the ids whose expression does not compile, with the reason.
  configure(specs: JsWatchSpec[]): WatchError[] {
    const errors: WatchError[] = [];
    const watches: JsWatch[] = [];
    for (const spec of specs) {
      const watch: JsWatch = { id: spec.id, spec, funcs: spec.funcs === null ? null : new Set(spec.funcs) };
      if (spec.expr !== undefined) {
        try {
          watch.evaluate = new Function(`return (${spec.expr});`) as () => unknown;
        } catch (e) {
          errors.push({ id: spec.id, error: `expression does not compile: ${e}` });
          continue;
        }
      }
      watches.push(watch);
    }
    this.watches = watches;
    return errors;
  }

  get count(): number {
    return this.watches.length;
  }

  appliesTo(func: number): boolean {
    return this.watches.some((w) => w.funcs === null || w.funcs.has(func));
  }

  // Read every watch applying to `func` for the record with sequence number `seq`.
  onRecord(func: number, seq: number): void {
    const values: Record<string, WatchValue> = {};
    let any = false;
    for (const watch of this.watches) {
      if (watch.funcs !== null && !watch.funcs.has(func)) {
        continue;
      }
      any = true;
      values[String(watch.id)] = this.read(watch);
    }
    if (!any) {
      return;
    }
    if (this.pending.size >= MAX_PENDING) {
      this.dropped++;
      return;
    }
    this.pending.set(seq, values);
  }

  private read(watch: JsWatch): WatchValue {
    if (watch.evaluate !== undefined) {
      try {
        return { v: jsonable(watch.evaluate()) };
      } catch (e) {
        return { e: String(e) };
      }
    }
    const recipe = watch.spec.recipe;
    if (recipe === undefined) {
      return { e: "nothing to read" };
    }
    const read = readRecipe(recipe, false);
    if (read.error !== undefined || read.bytes === undefined) {
      return { e: read.error ?? "nothing read" };
    }
    return read.strings === undefined ? { h: hex(read.bytes) } : { h: hex(read.bytes), s: read.strings };
  }

  // Values of the records [firstSeq, firstSeq + count), removed from the pending set.
  take(firstSeq: number, count: number): [number, Record<string, WatchValue>][] {
    const out: [number, Record<string, WatchValue>][] = [];
    if (this.pending.size === 0) {
      return out;
    }
    for (const [seq, values] of this.pending) {
      if (((seq - firstSeq) >>> 0) < count) {
        out.push([seq, values]);
      }
    }
    for (const [seq] of out) {
      this.pending.delete(seq);
    }
    return out;
  }
}
