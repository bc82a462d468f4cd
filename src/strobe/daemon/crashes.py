"""A crash report from the agent (agent/src/common/crash.ts) turned into a `crash` event: the backtrace symbolized
(function, file:line per frame), the stack dump around the frame pointer, the crashing function's locals
read from that dump (symbols/frame_locals.py), the thread's name.

    event = describe_crash(report, stack, pid, locate, thread_name)   # the event's fields (JSON)
    crash_row(session, pid, tid, ts_ns, event)                          # its events row

`locate(module_path, static_address)` gives a frame's source location (symbols/addresses.locate). Return
addresses point after their call instruction, so every frame but the first is looked up at address - 1 (the
call itself; the line shown is the call's line, the address shown the one on the stack). Symbolizing never
fails the report: a frame that cannot be located keeps its address and module.

What caused the signal comes from the kernel's siginfo, the report's `siginfo` (read by agent/src/common/crash.ts),
which `signal_cause` turns into the event's fields: a fault the kernel raised ("write of 0x0", with `signalCode`
SEGV_MAPERR...), a signal sent by kill(), raise() or sigqueue() (`sender`: its pid, uid and name, "sent by
kill[812]" or "raised by the program itself"), or a cause the agent could not verify ("cause not known": no fault
address is shown, it could be a sender's pid).

    signal_cause(Siginfo(signo=11, code=0, pid=812, uid=0), "SIGSEGV", 4242, names)
    # -> {"cause": "sent", "signalCode": "SI_USER", "sender": {"pid": 812, "uid": 0, "self": False, "name": "kill"}}

A crash inside the bytes Strobe's own hook overwrote at a function's entry (symbols/hook_safety.py refuses the
functions it can see would break; an indirect branch it cannot) is not the program's fault: `describe_crash` takes
`hooked_at(pc)`, the hooked function whose entry hook covers pc (`hook_covering`), and the event then carries
`strobeHook` (its name) and `likelyCause` ("likely caused by Strobe's hook on parse_header: ..."), its text too.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable
from typing import Any, Literal

from strobe.daemon.stack_frames import (
    MAX_FRAMES_WITH_LOCALS,
    Locate,
    ThreadFrame,
    frame_fields,
    image_base,
    thread_frames,
)
from strobe.daemon.symbols import TraceableFunction
from strobe.instrument.protocol import CrashFrame, CrashReport, Siginfo
from strobe.store.schema import EventKind
from strobe.symbols.addresses import SourceLocation
from strobe.symbols.frame_walk import MAX_FRAMES, StackDump
from strobe.symbols.hook_safety import MAX_SPAN, OVERWRITTEN_BYTES

log = logging.getLogger(__name__)


FRAME_MEMORY_BELOW, FRAME_MEMORY_ABOVE = 512, 128  # what frameMemory shows around the frame pointer
_ACCESS = {"read": "read", "write": "write", "execute": "execute"}

ProcessName = Callable[[int], str | None]
HookedAt = Callable[[int], str | None]  # a runtime address -> the hooked function whose entry hook overwrote it

SI_KERNEL = 0x80
# si_code of a signal sent by a process (<= 0), from <asm-generic/siginfo.h>; those with a sender pid and uid.
_SENT_CODES = {0: "SI_USER", -1: "SI_QUEUE", -2: "SI_TIMER", -3: "SI_MESGQ", -4: "SI_ASYNCIO", -5: "SI_SIGIO",
               -6: "SI_TKILL", -60: "SI_ASYNCNL"}
_WITH_SENDER = {0, -1, -6}
# si_code of a fault the kernel raised (> 0), per signal.
_FAULT_CODES = {
    "SIGSEGV": ["SEGV_MAPERR", "SEGV_ACCERR", "SEGV_BNDERR", "SEGV_PKUERR", "SEGV_ACCADI", "SEGV_ADIDERR",
                "SEGV_ADIPERR", "SEGV_MTEAERR", "SEGV_MTESERR", "SEGV_CPERR"],
    "SIGBUS": ["BUS_ADRALN", "BUS_ADRERR", "BUS_OBJERR", "BUS_MCEERR_AR", "BUS_MCEERR_AO"],
    "SIGFPE": ["FPE_INTDIV", "FPE_INTOVF", "FPE_FLTDIV", "FPE_FLTOVF", "FPE_FLTUND", "FPE_FLTRES", "FPE_FLTINV",
               "FPE_FLTSUB", "FPE_DECOVF", "FPE_DECDIV", "FPE_DECERR", "FPE_INVASC", "FPE_INVDEC", "FPE_FLTUNK",
               "FPE_CONDTRAP"],
    "SIGILL": ["ILL_ILLOPC", "ILL_ILLOPN", "ILL_ILLADR", "ILL_ILLTRP", "ILL_PRVOPC", "ILL_PRVREG", "ILL_COPROC",
               "ILL_BADSTK", "ILL_BADIADDR"],
}


def describe_crash(
    report: CrashReport, stack: bytes, pid: int, locate: Locate, thread_name: str | None,
    process_name: ProcessName | None = None, hooked_at: HookedAt | None = None,
) -> dict[str, Any]:
    """The crash event's fields, as debug_query shows them. `process_name(pid)` names a signal's sender;
    `hooked_at(pc)` the function whose entry hook overwrote the code at pc (see `hook_covering`)."""
    event: dict[str, Any] = {
        "signal": report.signal,
        "exceptionType": report.kind,
        "address": report.address,
        "threadId": report.tid,
    }
    if thread_name:
        event["threadName"] = thread_name
    cause = signal_cause(report.siginfo, report.signal, pid, process_name or read_process_name)
    if report.memory is not None and cause.get("cause", "fault") == "fault":
        event["faultAddress"] = report.memory.address
        event["access"] = _ACCESS.get(report.memory.operation, report.memory.operation)
    event.update(cause)
    event.update(describe_thread(report.frames, report.registers, report.stackBase, stack, locate, report.address,
                                 every_frame=False))
    hook = hooked_at(int(report.address, 16)) if hooked_at is not None else None
    if hook is not None:
        event["strobeHook"] = hook
        event["likelyCause"] = (f"likely caused by Strobe's hook on {hook}: the program crashed inside the bytes the "
                                "hook overwrote at the function's entry, not in its own code. Stop tracing "
                                f"{hook} (debug_trace remove, or remove its breakpoint) and run it again.")
    event["text"] = summary(event)
    return event


def hook_covering(pc: int, hooked: Iterable[TraceableFunction], span: Callable[[str, int], int | None]) -> str | None:
    """The hooked native function whose entry hook overwrote the code at runtime address `pc`, if any: pc lies in
    [entry, entry + span), `span(module, static address)` being the bytes a hook there overwrites
    (symbols/hook_safety.HookSafety.span; OVERWRITTEN_BYTES when the code cannot be read)."""
    for function in hooked:
        offset = pc - function.runtime_address
        if (function.runtime == "native" and function.runtime_address and 0 <= offset < MAX_SPAN
                and offset < (span(function.module, function.info.address) or OVERWRITTEN_BYTES)):
            return function.name
    return None


def describe_thread(frames: list[CrashFrame], registers: dict[str, str], stack_base: str, stack: bytes,
                    locate: Locate, pc: str | None, every_frame: bool = True) -> dict[str, Any]:
    """Where a stopped thread is (a crash, a breakpoint's pause): `function`, `sourceFile`, `line` of its innermost
    frame with a name, the symbolized `backtrace`, `registers`, the stack around the frame pointer as `frameMemory`,
    and the innermost function's `locals` read from the stack dump. With `every_frame` (a pause, whose dump reaches
    up the stack) each backtrace frame gets its own `locals`, or `localsNotCaptured` saying why not
    (daemon/stack_frames.py). `pc`: where the thread is, None when it is at a function's first instruction (its
    frame is not set up yet: no locals of its own)."""
    located = [_frame(f.address, f.module, f.base, f.returnAddress, locate) for f in frames]
    backtrace = [frame for frame, _ in located]
    for frame, sent in zip(backtrace, frames, strict=True):
        if sent.scanned:
            frame["scanned"] = True
    out: dict[str, Any] = {}
    top = next((f for f in backtrace if f.get("function")), None)
    if top is not None:
        out.update(function=top["function"], sourceFile=top.get("file"), line=top.get("line"))
    out["backtrace"] = backtrace
    out["registers"] = dict(registers)
    if not stack:
        return out
    dump = StackDump(int(stack_base, 16), stack)
    out["frameMemory"] = _frame_memory(dump, int(registers.get("rbp", "0"), 16))
    if not frames or int(frames[0].address, 16) != int(registers.get("pc", "0"), 16):
        return out  # the registers are those of Frida's copy of the code: no frame can be unwound from them
    walked = thread_frames(frames, registers, dump, [where for _, where in located], at_entry=pc is None,
                           locate=locate if every_frame else None, limit=MAX_FRAMES if every_frame else 1)
    fields = [frame_fields(frame, dump) if frame.index < MAX_FRAMES_WITH_LOCALS else {"localsNotCaptured": (
        f"beyond the first {MAX_FRAMES_WITH_LOCALS} frames: read them with debug_read ({{variable, frame: "
        f"{frame.index}}}) while the thread is paused")} for frame in walked]
    if fields and fields[0].get("locals"):
        out["locals"] = fields[0]["locals"]
    if every_frame:  # the backtrace as the stack's chain has it (the agent's frames, then those it missed)
        out["backtrace"] = backtrace = [_unwound_frame(frame) if frame.code is not None and frame.code.unwound
                                        else backtrace[frame.index] for frame in walked]
        for frame_out, extra in zip(backtrace, fields, strict=True):
            frame_out.update(extra)
    return out


def _unwound_frame(frame: ThreadFrame) -> dict[str, Any]:
    """A backtrace entry for a frame the agent's backtrace did not have (symbols/frame_walk.py found it)."""
    assert frame.code is not None
    out: dict[str, Any] = {"address": hex(frame.code.address), "module": os.path.basename(frame.code.module)}
    where = frame.location
    if where is not None:
        out.update({k: v for k, v in (("function", where.function), ("file", where.file), ("line", where.line)) if v})
    out["unwound"] = True
    return out


def _frame_memory(dump: StackDump, fp: int) -> dict[str, Any]:
    """The dump around the frame pointer, as much as a crash report carries (512 bytes below it, 128 above), or
    its first 640 bytes when the frame pointer is not in it (code without one)."""
    start, end = ((max(dump.base, fp - FRAME_MEMORY_BELOW), min(dump.end, fp + FRAME_MEMORY_ABOVE))
                  if dump.base <= fp < dump.end else (dump.base, min(dump.end, dump.base + FRAME_MEMORY_BELOW
                                                                     + FRAME_MEMORY_ABOVE)))
    data = dump.read(start, end - start) or b""
    return {"address": hex(start), "framePointer": hex(fp), "size": len(data),
            "belowFramePointer": max(fp - start, 0), "hex": data.hex()}


def summary(event: dict[str, Any]) -> str:
    """One line: 'SIGSEGV (read of 0x0) in crash_worker at crash.c:12, thread worker-1 (1234)'."""
    out = str(event["signal"])
    if "access" in event:
        out += f" ({event['access']} of {event['faultAddress']})"
    elif event.get("cause") in ("sent", "kernel", "unknown") or "signalCode" in event:
        out += f" ({_cause_text(event)})"
    where = event.get("function")
    if where:
        out += f" in {where}"
        if event.get("sourceFile"):
            out += f" at {os.path.basename(str(event['sourceFile']))}:{event.get('line')}"
    else:
        out += f" at {event['address']}"
    thread = event.get("threadName")
    out += f", thread {thread} ({event['threadId']})" if thread else f", thread {event['threadId']}"
    if event.get("strobeHook"):
        out += f"; likely caused by Strobe's hook on {event['strobeHook']}"
    return out


def signal_cause(
    siginfo: Siginfo | Literal["unknown"] | None, signal: str, pid: int, process_name: ProcessName
) -> dict[str, Any]:
    """The crash event's fields on what caused the signal, from the report's siginfo: `cause` (fault, sent, kernel
    or unknown), `signalCode` (the si_code's name) and, for a signal sent with a sender, `sender` (pid, uid, whether
    it is the crashing process itself, its name while it runs). None of them for a report without a siginfo."""
    if siginfo is None:
        return {}
    if siginfo == "unknown":
        return {"cause": "unknown"}
    code = siginfo.code
    if code == SI_KERNEL:
        return {"cause": "kernel", "signalCode": "SI_KERNEL"}
    if code > 0:
        names = _FAULT_CODES.get(signal, [])
        return {"cause": "fault", "signalCode": names[code - 1] if code <= len(names) else str(code)}
    out: dict[str, Any] = {"cause": "sent", "signalCode": _SENT_CODES.get(code, str(code))}
    if code in _WITH_SENDER and siginfo.pid is not None:
        sender_pid = siginfo.pid
        sender: dict[str, Any] = {"pid": sender_pid, "uid": siginfo.uid if siginfo.uid is not None else 0,
                                  "self": sender_pid == pid}
        name = None if sender["self"] or sender_pid <= 0 else process_name(sender_pid)
        if name:
            sender["name"] = name
        out["sender"] = sender
    return out


def _cause_text(event: dict[str, Any]) -> str:
    cause, code = event.get("cause"), event.get("signalCode")
    if cause == "unknown":
        return "cause not known"
    if cause == "kernel":
        return "SI_KERNEL: sent by the kernel, no fault address"
    sender = event.get("sender")
    if cause == "sent" and sender is not None:
        if sender["self"]:
            return "raised by the program itself"
        return f"sent by {sender['name']}[{sender['pid']}]" if sender.get("name") else f"sent by pid {sender['pid']}"
    if cause == "sent":
        return f"sent: {code}"
    return str(code)  # a fault without a memory access: FPE_INTDIV, ILL_ILLOPN...


def read_process_name(pid: int) -> str | None:
    """A process's name (its comm) while it runs; None once it is gone."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip() or None
    except OSError:
        return None


def crash_row(session: int, pid: int, tid: int, ts_ns: int, event: dict[str, Any],
              kind: EventKind = EventKind.CRASH) -> tuple[Any, ...]:
    """An events row (EVENT_COLUMNS order) of an event described by its fields (a crash; a pause, a logpoint's
    line): the summary as text, the rest as extra JSON."""
    fields = {k: v for k, v in event.items() if k != "text"}
    return (session, ts_ns, int(kind), pid, tid, None, None, None, None, None, event["text"], None,
            json.dumps(fields, separators=(",", ":")))


def thread_name(pid: int, tid: int) -> str | None:
    """The thread's name while the crashing thread waits (it is still alive)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip() or None
    except OSError:
        return None


def _frame(
    address: str, module: str, base: str, return_address: bool, locate: Locate
) -> tuple[dict[str, Any], SourceLocation | None]:
    out: dict[str, Any] = {"address": address, "module": os.path.basename(module)}
    try:
        runtime = int(address, 16)
        static = runtime - int(base, 16) + image_base(module)
        found = locate(module, static - 1 if return_address else static)
    except Exception:  # symbolizing is best effort: the address and module stay
        log.exception("cannot symbolize %s in %s", address, module)
        return out, None
    if found is not None:
        if found.function:
            out["function"] = found.function
        if found.file:
            out["file"] = found.file
        if found.line:
            out["line"] = found.line
    return out, found
