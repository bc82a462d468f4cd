"""The error tree every tool answers with: a spec error code plus a message that says what to do next."""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    NO_DEBUG_SYMBOLS = "NO_DEBUG_SYMBOLS"
    SIP_BLOCKED = "SIP_BLOCKED"
    SESSION_EXISTS = "SESSION_EXISTS"
    SESSION_NOT_FOUND = "SESSION_NOT_FOUND"
    PROCESS_EXITED = "PROCESS_EXITED"
    FRIDA_ATTACH_FAILED = "FRIDA_ATTACH_FAILED"
    INVALID_PATTERN = "INVALID_PATTERN"
    WATCH_FAILED = "WATCH_FAILED"
    TEST_RUN_NOT_FOUND = "TEST_RUN_NOT_FOUND"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    INTERNAL_ERROR = "INTERNAL_ERROR"


class StrobeError(Exception):
    """An error the caller can act on. `message` must say what went wrong and what to try next."""

    code: ErrorCode = ErrorCode.INTERNAL_ERROR

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code.value, "message": self.message}


class ValidationError(StrobeError):
    code = ErrorCode.VALIDATION_ERROR


class SessionNotFound(StrobeError):
    code = ErrorCode.SESSION_NOT_FOUND

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"No session found with ID '{session_id}'. Check the spelling, or call debug_list_sessions "
            "to see the sessions that exist."
        )


class SessionExists(StrobeError):
    code = ErrorCode.SESSION_EXISTS

    def __init__(self, session_id: str, binary: str) -> None:
        super().__init__(
            f"Session '{session_id}' is still running {binary}. Query it, or call "
            f"debug_stop({{sessionId: '{session_id}'}}) before launching this binary again."
        )


class ProcessAlreadyTraced(StrobeError):
    code = ErrorCode.SESSION_EXISTS

    def __init__(self, session_id: str, pid: int) -> None:
        super().__init__(
            f"Process {pid} is already in session '{session_id}'. Query that session, or call "
            f"debug_stop({{sessionId: '{session_id}'}}) before attaching to it again."
        )


class ProcessExited(StrobeError):
    code = ErrorCode.PROCESS_EXITED


class FridaAttachFailed(StrobeError):
    code = ErrorCode.FRIDA_ATTACH_FAILED


class NoDebugSymbols(StrobeError):
    code = ErrorCode.NO_DEBUG_SYMBOLS


class InvalidPattern(StrobeError):
    code = ErrorCode.INVALID_PATTERN


class WatchFailed(StrobeError):
    code = ErrorCode.WATCH_FAILED


class TestRunNotFound(StrobeError):
    __test__ = False  # not a pytest test class
    code = ErrorCode.TEST_RUN_NOT_FOUND


class InternalError(StrobeError):
    code = ErrorCode.INTERNAL_ERROR
