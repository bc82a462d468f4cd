// This process and its host: which copy of the agent this is, and the lifeline that ends the process when the
// daemon ends.
//
// A copy of this agent that nobody listens to. When Frida's child gating works, a forked child gets a fresh
// agent and this copy is gone. When it does not (Frida can miss a fork that happens while one of our
// messages is in flight; the periodic drain in native/tracer.ts sends rarely for that reason), the child
// runs with the parent's agent copy, whose send()s go nowhere: it must never wait for an answer from the host.
// Frida's Process.id keeps the parent's pid in a forked child, so the pid is asked of the kernel each time.
//
// The lifeline. The daemon holds both ends of a pipe for as long as it lives (instrument/launcher.py); the agent
// opens that pipe's read end again through /proc/<daemon>/fd/<fd> and asks the kernel to signal it when the pipe
// becomes readable (O_ASYNC), with SIGKILL as the signal (F_SETSIG) and this process as the recipient (F_SETOWN),
// or its whole process group when it leads one: a launched program (Frida starts it in a session of its own)
// and the children it forks, the ones still being gated or missed by Frida included. When the daemon ends, however
// it ends (kill -9 too), the kernel closes the daemon's ends, the pipe reads end-of-file and the kernel kills the
// process: nothing has to run in it, it may be stopped or blocked. (Frida's unloading of the script on a lost
// connection cannot be told apart from an exit or an exec(): it calls dispose() in those too, before any exit
// hook.) The daemon `release`s the lifeline before a deliberate detach. When a group leader exits, only the
// exiting process stays tied: children left running after it, in a session that has ended, are not killed later.

import { emit, LifelineState } from "./protocol.js";
import { LifelineRequest, ReleaseRequest } from "./requests.js";

const getpid = new NativeFunction(Module.getGlobalExportByName("getpid"), "int", []);
const getpgrp = new NativeFunction(Module.getGlobalExportByName("getpgrp"), "int", []);
const openFile = new SystemFunction(Module.getGlobalExportByName("open"), "int", ["pointer", "int", "...", "int"]);
const fcntl = new SystemFunction(Module.getGlobalExportByName("fcntl"), "int", ["int", "int", "...", "int"]);
const closeFd = new NativeFunction(Module.getGlobalExportByName("close"), "int", ["int"]);
const readlink = new NativeFunction(Module.getGlobalExportByName("readlink"), "int", ["pointer", "pointer", "size_t"]);
const poll = new NativeFunction(Module.getGlobalExportByName("poll"), "int", ["pointer", "uint", "int"]);
const kill = new NativeFunction(Module.getGlobalExportByName("kill"), "int", ["int", "int"]);

const O_RDONLY = 0;
const O_NONBLOCK = 0o4000;
const O_ASYNC = 0o20000;
const O_CLOEXEC = 0o2000000;
const F_GETFL = 3;
const F_SETFL = 4;
const F_SETOWN = 8;
const F_SETSIG = 10;
const SIGKILL = 9;
const POLLHUP = 0x10;

const loadedIn = getpid();

export function unheard(): boolean {
  return getpid() !== loadedIn;
}

interface Lifeline {
  fd: number;
  link: string; // "pipe:[inode]": tells our descriptor from another one the program may have put at the same number
  pid: number; // the process that tied it (a forked copy of this agent never touches it)
  group: boolean;
}

let lifeline: Lifeline | null = null;

function linkOf(fd: number): string | null {
  const buffer = Memory.alloc(256);
  const length = readlink(Memory.allocUtf8String(`/proc/self/fd/${fd}`), buffer, 255);
  return length > 0 ? buffer.readUtf8String(length) : null;
}

// The lifeline is still ours to change: same process, same descriptor.
function held(line: Lifeline): boolean {
  return getpid() === line.pid && linkOf(line.fd) === line.link;
}

function state(requestId: number, scope: LifelineState["scope"], error?: string): LifelineState {
  return error === undefined ? { type: "lifeline_state", requestId, scope }
    : { type: "lifeline_state", requestId, scope, error };
}

function untie(): void {
  const line = lifeline;
  lifeline = null;
  if (line === null || !held(line)) {
    return;
  }
  const flags = fcntl(line.fd, F_GETFL, 0).value;
  if (flags >= 0) {
    fcntl(line.fd, F_SETFL, flags & ~O_ASYNC);
  }
  closeFd(line.fd);
}

function tie(request: LifelineRequest): LifelineState {
  untie();
  const path = `/proc/${request.pid}/fd/${request.fd}`;
  const opened = openFile(Memory.allocUtf8String(path), O_RDONLY | O_NONBLOCK | O_CLOEXEC, 0);
  if (opened.value < 0) {
    return state(request.requestId, "none", `cannot open the daemon's lifeline ${path} (errno ${(opened as UnixSystemFunctionResult<number>).errno})`);
  }
  const fd = opened.value;
  const link = linkOf(fd);
  const me = getpid();
  const group = getpgrp() === me;
  const flags = fcntl(fd, F_GETFL, 0);
  const failed = link === null || !link.startsWith("pipe:") ? "it is not a pipe"
    : fcntl(fd, F_SETSIG, SIGKILL).value < 0 ? "F_SETSIG refused"
    : fcntl(fd, F_SETOWN, group ? -me : me).value < 0 ? "F_SETOWN refused"
    : flags.value < 0 || fcntl(fd, F_SETFL, flags.value | O_ASYNC).value < 0 ? "O_ASYNC refused"
    : null;
  if (failed !== null) {
    closeFd(fd);
    return state(request.requestId, "none", `cannot tie the daemon's lifeline ${path}: ${failed}`);
  }
  lifeline = { fd, link: link as string, pid: me, group };
  // The daemon may have ended between asking and now: its end-of-file came before O_ASYNC and sends nothing.
  const pollfd = Memory.alloc(8);
  pollfd.writeS32(fd).add(4).writeS16(1); // POLLIN
  if (poll(pollfd, 1, 0) > 0 && (pollfd.add(6).readS16() & POLLHUP) !== 0) {
    kill(group ? -me : me, SIGKILL);
  }
  return state(request.requestId, group ? "group" : "process");
}

// A group leader that exits keeps only itself tied (see above).
function onExit(): void {
  const line = lifeline;
  if (line !== null && line.group && held(line)) {
    fcntl(line.fd, F_SETOWN, line.pid);
  }
}

export function installLifeline(): void {
  recv("lifeline", function onLifeline(request: LifelineRequest): void {
    recv("lifeline", onLifeline);
    emit(tie(request));
  });
  recv("release", function onRelease(request: ReleaseRequest): void {
    recv("release", onRelease);
    untie();
    emit(state(request.requestId, "none"));
  });
  for (const name of ["exit", "_exit", "_Exit"]) {
    const address = Module.findGlobalExportByName(name);
    if (address !== null) {
      Interceptor.attach(address, { onEnter: onExit });
    }
  }
}
