"""Where Strobe keeps its files: one private directory per user, overridable with STROBE_HOME."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

PRIVATE_FILE_MODE = 0o600
"""Every file the daemon and the proxy create under STROBE_HOME: the user's only (database, WAL, log, pid)."""


class UnsafeHomeError(Exception):
    """STROBE_HOME is not a private directory of this user; the message says what is wrong and what to do."""


def private_opener(path: str, flags: int) -> int:
    """`open(..., opener=private_opener)`: a file created 0600 (whatever the umask), never through a symlink.

    An existing file is narrowed to 0600 too: a file Strobe writes is its own, and one left by an older version
    (which created them 0644) must not stay readable by others."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) & ~PRIVATE_FILE_MODE:
            os.fchmod(fd, PRIVATE_FILE_MODE)
    except OSError:
        os.close(fd)
        raise
    return fd


def private_dir(path: Path) -> Path:
    """A directory of Strobe's own (the symbol and agent caches, test-run files), created 0700 with its parents
    and narrowed to 0700 when it already exists wider: what is inside stays the user's even in a home that others
    may read. Returns `path`."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if stat.S_IMODE(os.stat(path).st_mode) & 0o077:
        os.chmod(path, 0o700)
    return path


@dataclass(frozen=True)
class StrobePaths:
    """Every file the daemon and the proxy agree on, derived from one home directory."""

    home: Path

    @classmethod
    def from_env(cls) -> StrobePaths:
        override = os.environ.get("STROBE_HOME")
        home = Path(override).expanduser() if override else Path.home() / ".strobe"
        return cls(home.absolute())

    @property
    def socket(self) -> Path:
        return self.home / "strobe.sock"

    @property
    def pid_file(self) -> Path:
        return self.home / "strobe.pid"

    @property
    def lock_file(self) -> Path:
        return self.home / "strobe.lock"

    @property
    def database(self) -> Path:
        return self.home / "strobe.db"

    @property
    def log_file(self) -> Path:
        return self.home / "daemon.log"

    @property
    def settings_file(self) -> Path:
        return self.home / "settings.json"

    @property
    def cache_dir(self) -> Path:
        return self.home / "cache"

    @property
    def reads_dir(self) -> Path:
        """Buffers dumped by debug_read (type 'bytes'): <sessionId>/<sessionId>-<time>.bin."""
        return self.home / "reads"

    def ensure_home(self) -> None:
        """Create the home directory private to the user (0700) if it does not exist, then `check_home`.

        An existing directory is never changed: if it is not safe, UnsafeHomeError says why and how to fix it."""
        if not os.path.lexists(self.home):
            self.home.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.mkdir(self.home, 0o700)
            except FileExistsError:
                pass  # another proxy created it at the same moment: checked below like any existing one
            else:
                os.chmod(self.home, 0o700)  # the one we just made: exactly 0700 whatever the umask
        self.check_home()

    def check_home(self) -> None:
        """Refuse a home that others could tamper with: it must be a real directory (not a symlink), owned by
        this user, and neither group- nor world-writable. Otherwise another user could replace the socket,
        plant a pid file or read the traces. Raises UnsafeHomeError; changes nothing."""
        home = self.home
        try:
            info = os.lstat(home)
        except FileNotFoundError:
            raise UnsafeHomeError(f"strobe: {_describe(home)} does not exist.") from None
        if stat.S_ISLNK(info.st_mode):
            target = os.readlink(home)
            raise UnsafeHomeError(
                f"strobe: {_describe(home)} is a symlink (to {target}). Strobe keeps its socket, database and logs "
                f"only in a real directory, so that nobody can redirect them. Set STROBE_HOME to the directory "
                f"itself ({home.resolve()}), or replace the link with a private directory: "
                f"`rm {home} && mkdir -m 700 {home}`."
            )
        if not stat.S_ISDIR(info.st_mode):
            raise UnsafeHomeError(
                f"strobe: {_describe(home)} is not a directory. Remove it or set STROBE_HOME to a directory of "
                f"your own (Strobe creates it, mode 700, if it does not exist)."
            )
        uid = os.geteuid()
        if info.st_uid != uid:
            raise UnsafeHomeError(
                f"strobe: {_describe(home)} belongs to {_user(info.st_uid)}, not to you ({_user(uid)}). Another "
                f"user's directory could hand you their socket or pid file. Set STROBE_HOME to a directory of your "
                f"own (Strobe creates it, mode 700, if it does not exist), or unset it to use ~/.strobe."
            )
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o022:
            who = " and ".join(w for w, bit in (("its group", 0o020), ("every user", 0o002)) if mode & bit)
            raise UnsafeHomeError(
                f"strobe: {_describe(home)} is writable by {who} (mode {mode:o}), so they could replace its "
                f"socket or pid file. Make it private: `chmod 700 {home}`."
            )


def _describe(home: Path) -> str:
    source = "STROBE_HOME" if os.environ.get("STROBE_HOME") else "the Strobe home"
    return f"{source} ({home})"


def _user(uid: int) -> str:
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"
