"""What caused a crash's signal, from the siginfo of the agent's crash report (agent/src/common/crash.ts): a fault
names its access and address, a sent signal its sender, and an unverified one says the cause is not known — never a
sender's pid shown as a fault address."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from strobe.daemon.crashes import describe_crash, signal_cause
from strobe.instrument.protocol import CrashReport, Siginfo

PID = 4242
REGISTERS = {"pc": "0x401136", "sp": "0x7ffe0000", "rbp": "0x7ffe0200"}


def report(siginfo: dict[str, int] | str | None, signal: str = "SIGSEGV", memory: dict[str, str] | None = None
           ) -> CrashReport:
    """A report as the agent sends it: `siginfo` is the JSON value of its field (None: no field)."""
    fields: dict[str, Any] = {
        "type": "crash", "tid": PID, "kind": "access-violation", "signal": signal, "address": "0x401136",
        "registers": REGISTERS, "frames": [], "stackBase": "0x7ffe0000", "stackSize": 0, "sec": 1, "nsec": 5,
    }
    if siginfo is not None:
        fields["siginfo"] = siginfo
    if memory is not None:
        fields["memory"] = memory
    return CrashReport.model_validate(fields)


def names(pid: int) -> str | None:
    return {812: "kill"}.get(pid)


def describe(siginfo: dict[str, int] | str | None, signal: str = "SIGSEGV", memory: dict[str, str] | None = None
             ) -> dict[str, Any]:
    return describe_crash(report(siginfo, signal, memory), b"", PID, lambda path, address: None, None, names)


def test_a_signal_sent_by_another_process_names_it() -> None:
    event = describe({"signo": 11, "code": 0, "pid": 812, "uid": 1000})
    assert event["cause"] == "sent" and event["signalCode"] == "SI_USER"
    assert event["sender"] == {"pid": 812, "uid": 1000, "self": False, "name": "kill"}
    assert event["text"] == "SIGSEGV (sent by kill[812]) at 0x401136, thread 4242"
    assert "faultAddress" not in event and "access" not in event
    assert event["registers"] == REGISTERS and "siginfo" not in event


def test_a_sender_that_is_gone_is_named_by_its_pid() -> None:
    event = describe({"signo": 7, "code": -1, "pid": 999, "uid": 0}, "SIGBUS")
    assert event["signalCode"] == "SI_QUEUE" and event["sender"] == {"pid": 999, "uid": 0, "self": False}
    assert event["text"].startswith("SIGBUS (sent by pid 999) at")


def test_a_signal_the_program_raised_itself() -> None:
    event = describe({"signo": 6, "code": -6, "pid": PID, "uid": 0}, "SIGABRT")
    assert event["signalCode"] == "SI_TKILL" and event["sender"]["self"] is True and "name" not in event["sender"]
    assert event["text"].startswith("SIGABRT (raised by the program itself) at")


def test_a_sent_signal_never_shows_frida_s_guess_of_a_fault_address() -> None:
    """Frida fills the memory details from si_addr, which holds the sender's pid for a sent signal."""
    event = describe({"signo": 11, "code": 0, "pid": 812, "uid": 0}, memory={"operation": "read", "address": hex(812)})
    assert "faultAddress" not in event and "read of" not in event["text"]


@pytest.mark.parametrize(("code", "signal", "name"), [("1", "SIGSEGV", "SEGV_MAPERR"), ("2", "SIGSEGV", "SEGV_ACCERR"),
                                                       ("2", "SIGBUS", "BUS_ADRERR"), ("1", "SIGFPE", "FPE_INTDIV"),
                                                       ("2", "SIGILL", "ILL_ILLOPN"), ("77", "SIGSEGV", "77")])
def test_a_fault_keeps_its_address_and_names_its_code(code: str, signal: str, name: str) -> None:
    memory = {"operation": "write", "address": "0x10"} if signal in ("SIGSEGV", "SIGBUS") else None
    event = describe({"signo": 0, "code": int(code)}, signal, memory)
    assert event["cause"] == "fault" and event["signalCode"] == name and "sender" not in event
    if memory is not None:
        assert (event["access"], event["faultAddress"]) == ("write", "0x10")
        assert event["text"].startswith(f"{signal} (write of 0x10) at")
    else:
        assert event["text"].startswith(f"{signal} ({name}) at")


def test_the_kernel_s_own_signal_has_no_fault_address() -> None:
    """SI_KERNEL: a general protection fault on x86 (a non-canonical address) gives si_addr 0, not the address."""
    event = describe({"signo": 11, "code": 128}, memory={"operation": "read", "address": "0x0"})
    assert event["cause"] == "kernel" and event["signalCode"] == "SI_KERNEL" and "faultAddress" not in event
    assert event["text"].startswith("SIGSEGV (SI_KERNEL: sent by the kernel, no fault address) at")


def test_an_unverified_siginfo_says_the_cause_is_not_known() -> None:
    event = describe("unknown")
    assert event["cause"] == "unknown" and "signalCode" not in event and "faultAddress" not in event
    assert event["text"] == "SIGSEGV (cause not known) at 0x401136, thread 4242"


def test_a_timer_s_signal_has_no_sender() -> None:
    timer = {"cause": "sent", "signalCode": "SI_TIMER"}
    assert signal_cause(Siginfo(signo=11, code=-2), "SIGSEGV", PID, names) == timer
    # a sender only for the codes that have one, whatever the bytes where si_pid would be
    assert signal_cause(Siginfo(signo=11, code=-2, pid=3, uid=0), "SIGSEGV", PID, names) == timer


def test_the_agent_s_siginfo_is_an_object_or_unknown() -> None:
    assert report("unknown").siginfo == "unknown" and report(None).siginfo is None
    assert report({"signo": 11, "code": 1}).siginfo == Siginfo(signo=11, code=1)
    with pytest.raises(ValidationError):
        report("maybe")


def test_a_report_without_siginfo_is_described_as_before() -> None:
    assert signal_cause(None, "SIGSEGV", PID, names) == {}
    event = describe(None, memory={"operation": "read", "address": "0x0"})
    assert event["text"] == "SIGSEGV (read of 0x0) at 0x401136, thread 4242" and "cause" not in event
