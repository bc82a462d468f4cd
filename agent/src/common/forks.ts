// A copy of this agent that nobody listens to. When Frida's child gating works, a forked child gets a fresh
// agent and this copy is gone. When it does not (Frida can miss a fork that happens while one of our
// messages is in flight; the periodic drain in native/tracer.ts sends rarely for that reason), the child
// runs with the parent's agent copy, whose send()s go nowhere: it must never wait for an answer from the host.
// Frida's Process.id keeps the parent's pid in a forked child, so the pid is asked of the kernel each time.

const getpid = new NativeFunction(Module.getGlobalExportByName("getpid"), "int", []);
const loadedIn = getpid();

export function unheard(): boolean {
  return getpid() !== loadedIn;
}
