// The launched program's standard input, when the caller gives it one (debug_launch `stdin`, `stdinFile` or
// `keepStdinOpen`). Frida spawns the program with a pipe for stdin but its API can only write to that pipe, never
// close it (frida-core's SpawnedProcess.input: write_all_async, no end-of-file), so a program reading to the end
// of its input would wait forever. Instead, before the program's first instruction, the daemon hands over a pipe
// of its own: the agent opens its read end again through /proc/<daemon>/fd/<fd> (as the lifeline does) and puts it
// at descriptor 0. The daemon writes the input and closes its end: the program reads end-of-file. Children inherit
// descriptor 0 as usual.

import { emit, StdinState } from "./protocol.js";
import { StdinRequest } from "./requests.js";

const openFile = new SystemFunction(Module.getGlobalExportByName("open"), "int", ["pointer", "int", "...", "int"]);
const dup2 = new SystemFunction(Module.getGlobalExportByName("dup2"), "int", ["int", "int"]);
const closeFd = new NativeFunction(Module.getGlobalExportByName("close"), "int", ["int"]);

const O_RDONLY = 0;

function errnoOf(result: UnixSystemFunctionResult<number>): number {
  return result.errno;
}

function redirect(request: StdinRequest): StdinState {
  const path = `/proc/${request.pid}/fd/${request.fd}`;
  const opened = openFile(Memory.allocUtf8String(path), O_RDONLY, 0) as UnixSystemFunctionResult<number>;
  if (opened.value < 0) {
    return { type: "stdin_state", requestId: request.requestId, error: `cannot open ${path} (errno ${errnoOf(opened)})` };
  }
  const moved = opened.value === 0 ? opened : dup2(opened.value, 0) as UnixSystemFunctionResult<number>;
  if (opened.value !== 0) {
    closeFd(opened.value);
  }
  if (moved.value < 0) {
    return { type: "stdin_state", requestId: request.requestId, error: `dup2 onto stdin failed (errno ${errnoOf(moved)})` };
  }
  return { type: "stdin_state", requestId: request.requestId };
}

export function installStdin(): void {
  recv("stdin", function onStdin(request: StdinRequest): void {
    recv("stdin", onStdin);
    emit(redirect(request));
  });
}
