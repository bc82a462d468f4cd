// Live memory reads (debug_read) and writes (debug_write). The host resolves variables from DWARF into flat recipes: a root
// address already relocated, pointer dereferences along the way, then `size` bytes to copy. This module
// only follows pointers and copies bytes; decoding into values happens on the host. A read never
// crashes the target: Frida turns an access violation into an exception, reported per target.

import { emit, ReadResult, WriteResult } from "./protocol.js";
import { PollSpec, ReadMemoryRequest, ReadRecipe, WriteMemoryRequest, WriteTarget } from "./requests.js";

const MAX_STRING = 1024;

const clockGettime = new NativeFunction(Module.getGlobalExportByName("clock_gettime"), "int", ["int", "pointer"]);
const timespec = Memory.alloc(16);

// CLOCK_MONOTONIC as [seconds, nanoseconds]: the clock trace records use, so snapshots interleave with them.
export function monotonicNow(): [number, number] {
  clockGettime(1, timespec);
  return [timespec.readU64().toNumber(), timespec.add(8).readU64().toNumber()];
}

function readable(address: NativePointer, size: number): boolean {
  const range = Process.findRangeByAddress(address);
  if (range === null || range.protection[0] !== "r") {
    return false;
  }
  // A read may span into the next mapping; only check that its last byte is readable too.
  if (size > 1) {
    const last = address.add(size - 1);
    if (last.compare(range.base.add(range.size)) >= 0) {
      const next = Process.findRangeByAddress(last);
      return next !== null && next.protection[0] === "r";
    }
  }
  return true;
}

interface Chunk {
  bytes: ArrayBuffer;
}

export interface RawRead {
  address?: NativePointer;
  bytes?: ArrayBuffer;
  strings?: Record<string, string | null>;
  error?: string;
}

// Follow a recipe and copy its bytes. `checked`: look each address up in the memory map first (clear
// messages, for debug_read); unchecked reads (watches, in hooks) rely on Frida turning a fault into an
// exception, which is cheaper.
export function readRecipe(recipe: ReadRecipe, checked: boolean): RawRead {
  let address = ptr(recipe.address);
  for (const step of recipe.derefs) {
    const at = address.add(step.offset);
    if (checked && !readable(at, Process.pointerSize)) {
      return { error: `Address ${at} not readable (reading the pointer ${step.label})` };
    }
    try {
      address = at.readPointer();
    } catch {
      return { error: `Address ${at} not readable (reading the pointer ${step.label})` };
    }
    if (address.isNull()) {
      return { error: `Null pointer at ${step.label}` };
    }
  }
  address = address.add(recipe.offset);
  if (checked && !readable(address, recipe.size)) {
    return { address, error: `Address ${address} not readable` };
  }
  let bytes: ArrayBuffer | null;
  try {
    bytes = address.readByteArray(recipe.size);
  } catch (e) {
    return { address, error: `Address ${address} not readable (${e})` };
  }
  if (bytes === null) {
    return { address, error: `Address ${address} not readable` };
  }
  const read: RawRead = { address, bytes };
  if (recipe.strings.length > 0) {
    const view = new DataView(bytes);
    const strings: Record<string, string | null> = {};
    for (const at of recipe.strings) {
      if (at + 8 > bytes.byteLength) {
        continue;
      }
      strings[String(at)] = readString(ptr(view.getBigUint64(at, true).toString()));
    }
    read.strings = strings;
  }
  return read;
}

function readOne(recipe: ReadRecipe, chunks: Chunk[], offset: { value: number }): ReadResult {
  const read = readRecipe(recipe, true);
  const result: ReadResult = { label: recipe.label };
  if (read.address !== undefined) {
    result.address = read.address.toString();
  }
  if (read.error !== undefined || read.bytes === undefined) {
    result.error = read.error ?? "nothing read";
    return result;
  }
  result.dataOffset = offset.value;
  result.size = read.bytes.byteLength;
  chunks.push({ bytes: read.bytes });
  offset.value += read.bytes.byteLength;
  if (read.strings !== undefined) {
    result.strings = read.strings;
  }
  return result;
}

function readString(address: NativePointer): string | null {
  if (address.isNull()) {
    return null;
  }
  const range = Process.findRangeByAddress(address);
  if (range === null || range.protection[0] !== "r") {
    return null;
  }
  const room = Math.min(MAX_STRING, range.base.add(range.size).sub(address).toUInt32());
  try {
    const bytes = address.readByteArray(room);
    if (bytes === null) {
      return null;
    }
    const end = new Uint8Array(bytes).indexOf(0);
    const length = end < 0 ? room : end; // a sized read does not stop at NUL by itself
    try {
      return address.readUtf8String(length);
    } catch {
      return address.readCString(length); // not UTF-8: bytes as Latin-1
    }
  } catch {
    return null;
  }
}

function readAll(recipes: ReadRecipe[]): [ReadResult[], ArrayBuffer] {
  const chunks: Chunk[] = [];
  const offset = { value: 0 };
  const results = recipes.map((recipe) => {
    try {
      return readOne(recipe, chunks, offset);
    } catch (e) {
      return { label: recipe.label, error: `Read failed: ${e}` };
    }
  });
  const data = new Uint8Array(offset.value);
  let at = 0;
  for (const chunk of chunks) {
    data.set(new Uint8Array(chunk.bytes), at);
    at += chunk.bytes.byteLength;
  }
  return [results, data.buffer as ArrayBuffer];
}

const polls = new Map<number, { timer: ReturnType<typeof setInterval>; samples: number }>();

function startPoll(recipes: ReadRecipe[], poll: PollSpec): void {
  const expected = Math.max(1, Math.floor(poll.durationMs / poll.intervalMs));
  const state = { timer: null as unknown as ReturnType<typeof setInterval>, samples: 0 };
  const tick = (): void => {
    const [sec, nsec] = monotonicNow();
    const [results, data] = readAll(recipes);
    state.samples += 1;
    emit({ type: "variable_snapshot", pollId: poll.pollId, sec, nsec, results }, data);
    if (state.samples >= expected) {
      finish(poll.pollId);
    }
  };
  polls.set(poll.pollId, state);
  state.timer = setInterval(tick, poll.intervalMs);
  tick();
}

function finish(pollId: number): void {
  const state = polls.get(pollId);
  if (state === undefined) {
    return;
  }
  clearInterval(state.timer);
  polls.delete(pollId);
  emit({ type: "poll_complete", pollId, sampleCount: state.samples });
}

export function onReadMemory(request: ReadMemoryRequest): void {
  if (request.poll !== undefined) {
    startPoll(request.recipes, request.poll);
    emit({ type: "read_response", requestId: request.requestId, results: [] });
    return;
  }
  const [results, data] = readAll(request.recipes);
  emit({ type: "read_response", requestId: request.requestId, results }, data);
}


// debug_write: each target's recipe is followed as a read's is (checked), and its bytes replaced, only in memory
// mapped writable (never code or read-only data); the answer has the bytes before and after.
export function onWriteMemory(request: WriteMemoryRequest): void {
  const results = request.targets.map((target) => writeOne(target));
  emit({ type: "memory_written", requestId: request.requestId, results });
}

function writeOne(target: WriteTarget): WriteResult {
  const read = readRecipe(target.recipe, true);
  const result: WriteResult = { label: target.recipe.label };
  if (read.address !== undefined) {
    result.address = read.address.toString();
  }
  if (read.error !== undefined || read.bytes === undefined || read.address === undefined) {
    result.error = read.error ?? "nothing read";
    return result;
  }
  const range = Process.findRangeByAddress(read.address);
  if (range === null || range.protection[1] !== "w") {
    const file = range?.file?.path;
    result.error = `Address ${read.address} is in memory mapped ${range?.protection ?? "nowhere"}` +
      `${file !== undefined ? ` (${file})` : ""}: not writable, so Strobe does not write there`;
    return result;
  }
  const bytes = hexBytes(target.data);
  if (bytes.length !== target.recipe.size) {
    result.error = `${bytes.length} bytes given for a ${target.recipe.size}-byte target`;
    return result;
  }
  result.previous = hex(read.bytes);
  read.address.writeByteArray(bytes);
  const after = read.address.readByteArray(target.recipe.size);
  result.current = after === null ? "" : hex(after);
  return result;
}

function hexBytes(text: string): number[] {
  const out: number[] = [];
  for (let i = 0; i + 1 < text.length; i += 2) {
    out.push(parseInt(text.slice(i, i + 2), 16));
  }
  return out;
}

function hex(bytes: ArrayBuffer): string {
  return Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, "0")).join("");
}
