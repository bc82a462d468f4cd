// A copy of this agent that nobody listens to. When Frida's child gating works, a forked child gets a fresh
// agent and this copy is gone. When it does not (Frida can miss a fork that happens while one of our
// messages is in flight; the periodic drain in native/tracer.ts sends rarely for that reason), the child
// runs with the parent's agent copy, whose send()s go nowhere: it must never wait for an answer from the host.

const loadedIn = Process.id;

export function unheard(): boolean {
  return Process.id !== loadedIn;
}
