"""A launched program's standard input, when the caller gives it one (debug_launch `stdin`, `stdinFile`,
`keepStdinOpen`; more with debug_input).

Frida spawns every program with a pipe on its descriptor 0, but it can only write to that pipe: `device.input(pid,
data)` writes `data` (an empty one writes nothing) and nothing closes it, so a program reading to end-of-file would
never finish (frida-core's SpawnedProcess.input is a write_all_async; verified with frida 17.26). So the daemon
makes a pipe of its own, the agent puts its read end at the program's descriptor 0 before the program runs
(agent/src/common/stdin.ts, `ProcessHandle.redirect_stdin`), and a StdinFeed writes into the other end from the
event loop, never blocking it: what the pipe cannot take yet waits in a queue (bounded by MAX_PENDING_BYTES), a file
is read chunk by chunk as the program consumes it, and closing the end once everything is written is the program's
end-of-file. Launched without any of those parameters, a program keeps Frida's pipe, which nobody writes and which
is never closed: a read from stdin waits until the session is stopped.

    source = StdinSource.of(text="3\\n4\\n", path=None, keep_open=False)   # before the spawn: errors come first
    feed = StdinFeed(asyncio.get_running_loop(), source)
    handle.redirect_stdin(os.getpid(), feed.read_end)                    # before the resume
    feed.connected()                                                     # writes, then closes: EOF
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import stat
import threading
from dataclasses import dataclass
from typing import BinaryIO

from strobe.errors import ValidationError

log = logging.getLogger(__name__)

MAX_STDIN_TEXT = 1_048_576  # characters of `stdin` / debug_input `text` per call
MAX_STDIN_FILE = 16 * 1024 * 1024  # bytes of `stdinFile`
MAX_PENDING_BYTES = 16 * 1024 * 1024  # written but not yet taken by the pipe: the program is not reading
CHUNK = 65_536


@dataclass
class StdinSource:
    """What a launch feeds its program: text or an opened file (checked before anything is spawned)."""

    data: bytes
    file: BinaryIO | None
    size: int  # bytes that will be fed at start
    keep_open: bool

    @classmethod
    def of(cls, text: str | None, path: str | None, keep_open: bool) -> StdinSource | None:
        """None when the launch gives no stdin parameter (the program keeps Frida's pipe). Blocking: opens the file."""
        if text is not None and path is not None:
            raise ValidationError("Pass either stdin (text) or stdinFile (a path), not both: the program has one "
                                  "standard input.")
        if path is None:
            if text is None and not keep_open:
                return None
            data = (text or "").encode()
            return cls(data, None, len(data), keep_open)
        if not os.path.isabs(path):
            raise ValidationError(f"stdinFile must be an absolute path (got {path[:200]!r}).")
        try:
            info = os.stat(path)
            if not stat.S_ISREG(info.st_mode):  # a FIFO or a device would block or never end
                raise ValidationError(f"stdinFile {path} is not a regular file: pass a file, or the text as stdin.")
            if info.st_size > MAX_STDIN_FILE:
                raise ValidationError(f"stdinFile {path} holds {info.st_size:,} bytes, over the limit of "
                                      f"{MAX_STDIN_FILE:,} (16 MiB): feed a smaller file, or send the rest with "
                                      "debug_input (launch with keepStdinOpen: true).")
            file = open(path, "rb")  # noqa: SIM115 - read chunk by chunk as the program consumes it; the feed closes it
        except OSError as exc:
            raise ValidationError(f"stdinFile {path} cannot be read ({exc.strerror or exc}): pass an existing, "
                                  "readable file, or the text itself as stdin.") from exc
        return cls(b"", file, info.st_size, keep_open)


class StdinFeed:
    """The daemon's end of a program's stdin pipe. Every method but `discard` runs on the event loop's thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, source: StdinSource) -> None:
        self._loop = loop
        self._thread = threading.get_ident()  # the loop's
        self._read, self._write = os.pipe()  # close-on-exec: nothing else the daemon starts holds them
        os.set_blocking(self._write, False)
        self._queue: collections.deque[memoryview] = collections.deque()
        self._file = source.file
        self._file_left = MAX_STDIN_FILE
        self._closing = not source.keep_open
        self._watching = False
        self.closed = False  # our end is closed: the program has read (or will read) end-of-file
        self.broken = False  # the program closed its stdin or is gone: nothing more can reach it
        if source.data:
            self._queue.append(memoryview(source.data))

    @property
    def read_end(self) -> int:
        return self._read

    @property
    def pending(self) -> int:
        """Bytes given but not yet taken by the pipe (the file's unread part not counted)."""
        return sum(len(chunk) for chunk in self._queue)

    def connected(self) -> None:
        """The program holds the read end now: let ours go and start writing."""
        with contextlib.suppress(OSError):
            os.close(self._read)
        self._read = -1
        self._drain()

    def send(self, data: bytes, close: bool) -> None:
        """Queue `data` for the program; with `close`, end its input once everything queued is written."""
        if self.broken:
            raise ValidationError("The program closed its standard input (or it and its children are gone): the input "
                                  "cannot reach it.")
        if self.closed or self._closing:
            raise ValidationError("The program's stdin is already closed (it has read, or will read, end-of-file); "
                                  "nothing more can be sent. Launch it again with keepStdinOpen: true to send input "
                                  "over several debug_input calls.")
        if self.pending + len(data) > MAX_PENDING_BYTES:
            raise ValidationError(
                f"The program is not reading its stdin: {self.pending:,} bytes are still waiting and {len(data):,} "
                f"more would pass the limit of {MAX_PENDING_BYTES:,}. Query its output to see what it is doing.")
        if data:
            self._queue.append(memoryview(data))
        self._closing = close
        self._drain()

    def _drain(self) -> None:
        while not self.broken and self._write >= 0:
            if not self._queue and self._file is not None:
                chunk = self._file.read(min(CHUNK, self._file_left)) if self._file_left > 0 else b""
                self._file_left -= len(chunk)
                if chunk:
                    self._queue.append(memoryview(chunk))
                else:
                    self._file.close()
                    self._file = None
            if not self._queue:
                break
            head = self._queue[0]
            try:
                written = os.write(self._write, head[:CHUNK])
            except BlockingIOError:  # the pipe is full: on again when the program has read some
                self._watch(True)
                return
            except OSError as exc:  # EPIPE: no reader left
                log.info("stdin pipe: the program no longer reads it (%s); %d bytes dropped", exc, self.pending)
                self._end(broken=True)
                return
            if written == len(head):
                self._queue.popleft()
            else:
                self._queue[0] = head[written:]
        self._watch(False)
        if self._closing and not self._queue and self._file is None and not self.closed:
            self._end(broken=False)

    def _watch(self, on: bool) -> None:
        if on and not self._watching:
            self._loop.add_writer(self._write, self._drain)
        elif not on and self._watching:
            self._loop.remove_writer(self._write)
        self._watching = on

    def _end(self, broken: bool) -> None:
        self._watch(False)
        self._queue.clear()
        for fd in (self._read, self._write):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._read = self._write = -1
        if self._file is not None:
            self._file.close()
            self._file = None
        self.broken = self.broken or broken
        self.closed = True

    def discard(self) -> None:
        """The session has ended, or its launch failed: drop what waits and close everything (from any thread)."""
        if threading.get_ident() == self._thread:
            self._end(broken=True)
            return
        try:
            self._loop.call_soon_threadsafe(self._end, True)
        except RuntimeError:  # the loop is closed: nothing watches the pipe any more
            self._end(broken=True)
