"""Where Strobe keeps its files: one private directory per user, overridable with STROBE_HOME."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


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
        """Create the home directory private to the user (0700), tightening it if it already exists."""
        self.home.mkdir(parents=True, exist_ok=True)
        os.chmod(self.home, 0o700)
