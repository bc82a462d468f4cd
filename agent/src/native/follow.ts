// Pointer arguments and return values followed at call time (serializationDepth). The host works out, per
// traced function, which captured register holds a pointer worth following and what sits behind it: a
// table of nodes, each saying how many bytes to copy at the pointee, where C-string pointers are inside
// them, and which pointer fields to follow further (to which node). This module only copies bytes along
// that plan, in the tracer's JavaScript callback, before the call's record is committed; the host decodes.
//
// A followed value leaves as {a: address, h: hex bytes, s: {offset: C string}, p: {offset: value}},
// {t: the string} for a char*, {a, e: why it could not be read}, or {c: address} for a pointer back to a
// value already being read on the way down (a circular reference). Reads never crash the target: Frida
// turns an access violation into an exception.

import { FollowFunction, FollowNode } from "../common/protocol.js";
import {
  KIND_ENTER,
  RECORD_ARG_SIZE,
  RECORD_ARGS,
  RECORD_KIND,
  WATCH_CAPTURE,
  WATCH_FOLLOW_ENTER,
  WATCH_FOLLOW_EXIT,
} from "./layout.js";

const MAX_PENDING = 65536; // calls with followed values waiting to be drained; further ones are dropped
const MAX_READS = 64; // pointees read per call, all arguments together
const MAX_BYTES = 16384; // bytes copied per call
const MAX_STRING = 1024;
const RAX = 6; // slot register index meaning the return value (a[0] of the exit record)

export type FollowedValue =
  | { a: string; h: string; s?: Record<string, string | null>; p?: Record<string, FollowedValue> }
  | { t: string | null }
  | { a: string; e: string }
  | { c: string };

interface Plan {
  version: number;
  nodes: FollowNode[];
  enter: [string, number, number][]; // (key, register 0-5, node)
  exit: [string, number, number][];
}

interface Budget {
  reads: number;
  bytes: number;
}

const HEX: string[] = Array.from({ length: 256 }, (_, i) => (i < 16 ? "0" : "") + i.toString(16));

function hex(bytes: ArrayBuffer): string {
  const view = new Uint8Array(bytes);
  const parts = new Array<string>(view.length);
  for (let i = 0; i < view.length; i++) {
    parts[i] = HEX[view[i]];
  }
  return parts.join("");
}

// A C string of at most MAX_STRING characters. Read up to its NUL in one go (the common case, and cheap);
// one with no NUL before the end of its mapping faults and is read again up to the mapping's end.
function cString(address: NativePointer): string | null {
  let text: string | null;
  try {
    text = address.readUtf8String();
  } catch {
    try {
      text = address.readCString(); // not UTF-8: bytes as Latin-1
    } catch {
      return shortString(address);
    }
  }
  return text !== null && text.length > MAX_STRING ? text.slice(0, MAX_STRING) : text;
}

// A string running into the end of its mapping: read up to there.
function shortString(address: NativePointer): string | null {
  const range = Process.findRangeByAddress(address);
  if (range === null || range.protection[0] !== "r") {
    return null;
  }
  const room = Math.min(MAX_STRING, range.base.add(range.size).sub(address).toUInt32());
  try {
    return address.readCString(room);
  } catch {
    return null;
  }
}

export class ArgFollower {
  private plans = new Map<number, Plan>();
  private capture = new Map<number, number>(); // WATCH_CAPTURE_* bits of a function, with its plan
  private pending = new Map<number, [number, Record<string, FollowedValue>]>();
  dropped = 0;

  // Add or replace the plans of these functions; an entry without slots stops following that function.
  configure(funcs: FollowFunction[]): void {
    for (const f of funcs) {
      if (f.capture) {
        this.capture.set(f.id, f.capture & WATCH_CAPTURE);
      } else {
        this.capture.delete(f.id);
      }
      const enter = f.slots.filter((s) => s[1] !== RAX);
      const exit = f.slots.filter((s) => s[1] === RAX);
      if (enter.length === 0 && exit.length === 0) {
        this.plans.delete(f.id);
      } else {
        this.plans.set(f.id, { version: f.version, nodes: f.nodes, enter, exit });
      }
    }
  }

  // Watch-mask bits for a function: follow on entry, on exit, and what its calls capture beyond the integer
  // registers.
  mask(func: number): number {
    const plan = this.plans.get(func);
    const capture = this.capture.get(func) ?? 0;
    if (plan === undefined) {
      return capture;
    }
    return capture | (plan.enter.length > 0 ? WATCH_FOLLOW_ENTER : 0) | (plan.exit.length > 0 ? WATCH_FOLLOW_EXIT : 0);
  }

  get active(): boolean {
    return this.plans.size > 0;
  }

  // Follow what the plan of `func` says for the record at `record` (sequence number `seq`, not committed).
  onRecord(func: number, seq: number, record: NativePointer): void {
    const plan = this.plans.get(func);
    if (plan === undefined) {
      return;
    }
    const entering = record.add(RECORD_KIND).readU16() === KIND_ENTER;
    const slots = entering ? plan.enter : plan.exit;
    if (slots.length === 0) {
      return;
    }
    if (this.pending.size >= MAX_PENDING) {
      this.dropped++;
      return;
    }
    const budget: Budget = { reads: MAX_READS, bytes: MAX_BYTES };
    const values: Record<string, FollowedValue> = {};
    for (const [key, register, node] of slots) {
      const address = record.add(RECORD_ARGS + RECORD_ARG_SIZE * (entering ? register : 0)).readPointer();
      if (!address.isNull()) {
        values[key] = this.read(plan.nodes, node, address, [], budget);
      }
    }
    this.pending.set(seq, [plan.version, values]);
  }

  private read(nodes: FollowNode[], index: number, address: NativePointer, path: string[],
               budget: Budget): FollowedValue {
    const node = nodes[index];
    const at = address.toString();
    if (node.t === 1) {
      return { t: cString(address) };
    }
    if (path.includes(at)) {
      return { c: at };
    }
    if (budget.reads <= 0 || budget.bytes < node.n) {
      return { a: at, e: "not read: the per-call budget of followed memory is spent" };
    }
    budget.reads--;
    budget.bytes -= node.n;
    let bytes: ArrayBuffer | null;
    try {
      bytes = address.readByteArray(node.n);
    } catch {
      bytes = null;
    }
    if (bytes === null) {
      return { a: at, e: `address ${at} not readable` };
    }
    const out: { a: string; h: string; s?: Record<string, string | null>; p?: Record<string, FollowedValue> } = {
      a: at,
      h: hex(bytes),
    };
    // Pointers inside are read again from the target (one cheap read each) rather than decoded from the bytes.
    if (node.s !== undefined && node.s.length > 0) {
      const strings: Record<string, string | null> = {};
      for (const offset of node.s) {
        const p = address.add(offset).readPointer();
        if (!p.isNull()) {
          strings[offset] = cString(p);
        }
      }
      out.s = strings;
    }
    if (node.p !== undefined && node.p.length > 0) {
      const children: Record<string, FollowedValue> = {};
      const below = path.concat([at]);
      for (const [offset, child] of node.p) {
        const p = address.add(offset).readPointer();
        if (!p.isNull()) {
          children[offset] = this.read(nodes, child, p, below, budget);
        }
      }
      out.p = children;
    }
    return out;
  }

  // Values of the records [firstSeq, firstSeq + count) as (seq, plan version, values), removed from the set.
  take(firstSeq: number, count: number): [number, number, Record<string, FollowedValue>][] {
    const out: [number, number, Record<string, FollowedValue>][] = [];
    if (this.pending.size === 0) {
      return out;
    }
    for (const [seq, [version, values]] of this.pending) {
      if (((seq - firstSeq) >>> 0) < count) {
        out.push([seq, version, values]);
      }
    }
    for (const [seq] of out) {
      this.pending.delete(seq);
    }
    return out;
  }
}
