// Pointer arguments and return values followed at call time (serializationDepth). The host works out, per
// traced function, which captured register holds a pointer worth following and what sits behind it: a
// table of nodes, each saying how many bytes to copy at the pointee, where C-string pointers are inside
// them, and which pointer fields to follow further (to which node). This module only copies bytes along
// that plan, in the tracer's JavaScript callback, before the call's record is committed; the host decodes.
//
// A followed value leaves as {a: address, h: hex bytes, s: {offset: C string}, p: {offset: value},
// q: {offset: counted data}}, {t: the string} for a char*, {a, e: why it could not be read}, or {c: address}
// for a pointer back to a value already being read on the way down (a circular reference). Counted data (a
// String's or vector's elements: a data pointer and a count, or an end pointer, in the value's bytes) leaves
// as {a, k: the element count, h: the bytes of at most the node's cap of them (fewer when the call's budget is
// short), x: each element's own {s, p, q}}. A value held in registers (a &str's pointer and length, an Rc) is
// copied from a scratch buffer its register words are written to. Reads never crash the target: Frida turns
// an access violation into an exception.

import { FollowFunction, FollowNode } from "../common/requests.js";
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

interface Extras {
  s?: Record<string, string | null>;
  p?: Record<string, FollowedValue>;
  q?: Record<string, FollowedArray>;
}

export type FollowedValue =
  | ({ a: string; h: string } & Extras)
  | { t: string | null }
  | { a: string; e: string }
  | { c: string };

type FollowedArray = { a: string; k: number; h: string; x?: Extras[] } | { a: string; e: string };

interface Plan {
  version: number;
  nodes: FollowNode[];
  enter: [string, number, number][]; // (key, register 0-5, node)
  exit: [string, number, number][];
  wordsEnter: [string, number[], number][]; // (key, registers in order, node)
  wordsExit: [string, number[], number][];
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
  private scratch = Memory.alloc(64); // register words of a value held in registers, read as its bytes
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
      const words = (f.words ?? []).filter((w) => w[1].length > 0 && w[1].length <= 8);
      const wordsEnter = words.filter((w) => !w[1].includes(RAX));
      const wordsExit = words.filter((w) => w[1].every((r) => r === RAX));
      if (enter.length === 0 && exit.length === 0 && wordsEnter.length === 0 && wordsExit.length === 0) {
        this.plans.delete(f.id);
      } else {
        this.plans.set(f.id, { version: f.version, nodes: f.nodes, enter, exit, wordsEnter, wordsExit });
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
    const enter = plan.enter.length > 0 || plan.wordsEnter.length > 0;
    const exit = plan.exit.length > 0 || plan.wordsExit.length > 0;
    return capture | (enter ? WATCH_FOLLOW_ENTER : 0) | (exit ? WATCH_FOLLOW_EXIT : 0);
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
    const words = entering ? plan.wordsEnter : plan.wordsExit;
    if (slots.length === 0 && words.length === 0) {
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
    for (const [key, registers, node] of words) {
      registers.forEach((register, i) => {
        const word = record.add(RECORD_ARGS + RECORD_ARG_SIZE * (entering ? register : 0)).readU64();
        this.scratch.add(8 * i).writeU64(word);
      });
      values[key] = this.read(plan.nodes, node, this.scratch, [], budget);
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
    const out: { a: string; h: string } & Extras = { a: at, h: hex(bytes) };
    this.expand(nodes, node, address, path.concat([at]), budget, out);
    return out;
  }

  // The C strings, pointees and counted data of a value of `node` at `address` (pointers inside are read again
  // from the target, one cheap read each, rather than decoded from the bytes).
  private expand(nodes: FollowNode[], node: FollowNode, address: NativePointer, below: string[], budget: Budget,
                 out: Extras): void {
    try {
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
        for (const [offset, child] of node.p) {
          const p = address.add(offset).readPointer();
          if (!p.isNull()) {
            children[offset] = this.read(nodes, child, p, below, budget);
          }
        }
        out.p = children;
      }
      if (node.q !== undefined && node.q.length > 0) {
        const counted: Record<string, FollowedArray> = {};
        for (const [offset, countAt, mode, child] of node.q) {
          counted[offset] = this.readCounted(nodes, child, address, offset, countAt, mode, below, budget);
        }
        out.q = counted;
      }
    } catch {
      // the value's own bytes could not be read again: what was read so far stays
    }
  }

  // Counted data: the data pointer at `offset` in the value at `address`, its count at `countAt` (mode 0: a
  // u64; mode 1: an end pointer); copies at most the array node's cap of elements, within the call's budget.
  private readCounted(nodes: FollowNode[], index: number, address: NativePointer, offset: number, countAt: number,
                      mode: number, below: string[], budget: Budget): FollowedArray {
    const node = nodes[index];
    const data = address.add(offset).readPointer();
    const at = data.toString();
    const size = node.n;
    let count: number;
    if (mode === 1) {
      const end = address.add(countAt).readPointer();
      if (end.compare(data) < 0 || size <= 0) {
        return { a: at, e: `end pointer ${end} before the data pointer ${at}` };
      }
      count = Math.floor(parseInt(end.sub(data).toString(10), 10) / size);
    } else {
      count = address.add(countAt).readU64().toNumber();
    }
    if (count === 0) {
      return { a: at, k: 0, h: "" };
    }
    if (data.isNull()) {
      return { a: at, e: `null data pointer with ${count} elements` };
    }
    let shown = Math.min(count, node.m ?? 0);
    if (size > 0) {
      shown = Math.min(shown, Math.floor(budget.bytes / size));
    }
    if (budget.reads <= 0 || (shown === 0 && count > 0 && (node.m ?? 0) > 0)) {
      return { a: at, e: "not read: the per-call budget of followed memory is spent" };
    }
    budget.reads--;
    budget.bytes -= shown * size;
    let bytes: ArrayBuffer | null;
    try {
      bytes = data.readByteArray(shown * size);
    } catch {
      bytes = null;
    }
    if (bytes === null) {
      return { a: at, e: `address ${at} not readable` };
    }
    const out: { a: string; k: number; h: string; x?: Extras[] } = { a: at, k: count, h: hex(bytes) };
    if (node.e !== undefined) {
      const element = nodes[node.e];
      const extras: Extras[] = [];
      for (let i = 0; i < shown; i++) {
        const extra: Extras = {};
        this.expand(nodes, element, data.add(i * size), below, budget, extra);
        extras.push(extra);
      }
      out.x = extras;
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
