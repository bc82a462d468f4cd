"""The JSON the client sees, shaped in one place from the daemon's and the store's typed results."""

from __future__ import annotations

from strobe.daemon.watches import Watch
from strobe.store.sessions import ProcessRecord, SessionRecord, SessionStatus


def session(record: SessionRecord) -> dict[str, object]:
    out: dict[str, object] = {
        "sessionId": record.id,
        "binaryPath": record.binary_path,
        "pid": record.pid,
        "startedAt": record.started_at,
        "endedAt": record.ended_at,
        "status": record.status.value,
    }
    if record.status is not SessionStatus.RUNNING:
        out["exitCode"] = record.exit_code
    if record.signal is not None:
        out["signal"] = record.signal
    if record.retained:
        out["retained"] = True
    return out


def process(record: ProcessRecord) -> dict[str, object]:
    out: dict[str, object] = {"pid": record.pid, "status": record.status.value}
    if record.parent_pid is not None:
        out["parentPid"] = record.parent_pid
    if record.binary_path:
        out["binaryPath"] = record.binary_path
    if record.status is not SessionStatus.RUNNING:
        out["exitCode"] = record.exit_code
    if record.signal is not None:
        out["signal"] = record.signal
    return out


def watch(w: Watch) -> dict[str, object]:
    out: dict[str, object] = {"label": w.label}
    if w.spec.variable is not None:
        out["variable"] = w.spec.variable
    if w.spec.address is not None:
        out["address"] = w.spec.address
    if w.spec.expr is not None:
        out["expr"] = w.spec.expr
    if w.read is not None:
        out["type"] = w.read.type_name
        out["size"] = w.read.size
    if w.spec.on is not None:
        out["on"] = list(w.spec.on)
    return out
