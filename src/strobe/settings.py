"""Settings: built-in defaults < $STROBE_HOME/settings.json < <projectRoot>/.strobe/settings.json.

Every caller resolves them through one SettingsSource (the session manager's), afresh on every tool call.
A bad file or value never fails a call: it falls back to the default and the caller gets a warning naming
the file, the key and the accepted range.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strobe.paths import StrobePaths


@dataclass(frozen=True)
class SettingSpec:
    key: str
    default: int
    minimum: int
    maximum: int
    description: str


SETTING_SPECS: tuple[SettingSpec, ...] = (
    SettingSpec(
        "events.maxPerSession", 200_000, 1, 10_000_000,
        "Per-session event limit; the oldest events are dropped first (FIFO).",
    ),
    SettingSpec(
        "events.maxOutputPerSession", 100_000, 1, 10_000_000,
        "Per-session limit on stdout/stderr lines, crashes and variable snapshots, kept apart from trace events "
        "(which never push them out); the oldest are dropped first.",
    ),
    SettingSpec(
        "storage.maxBytes", 10 * 1024**3, 64 * 1024**2, 1 << 50,
        "The store's size cap: above it the oldest ended sessions are purged first (global settings only).",
    ),
    SettingSpec(
        "test.statusRetryMs", 5_000, 500, 60_000,
        "Base polling delay suggested by debug_test_status.",
    ),
    SettingSpec(
        "trace.hotCallsPerSecond", 100_000, 1_000, 100_000_000,
        "Calls per second above which a traced function is sampled instead of fully recorded.",
    ),
    SettingSpec(
        "trace.samplePercent", 1, 1, 100,
        "Share of a hot function's calls recorded while it is sampled; 100 records every call.",
    ),
    SettingSpec(
        "trace.fastPath", 1, 0, 1,
        "1: native functions are traced through Strobe's own trampolines where they may be (about 3x cheaper per "
        "call); 0: through Frida's, as for a process Strobe attached to. Set 0 for a program that switches stacks "
        "within a thread (ucontext, hand-written coroutines).",
    ),
    SettingSpec(
        "daemon.idleTimeoutMs", 30 * 60 * 1000, 100, 7 * 24 * 3600 * 1000,
        "The daemon exits after this long without a tool call (global settings only).",
    ),
    SettingSpec(
        "query.maxEventBytes", 4096, 1024, 1 << 20,
        "Largest event (or debug_read result) in an answer, as compact JSON; bigger values are cut, biggest first.",
    ),
)
_SPECS_BY_KEY = {spec.key: spec for spec in SETTING_SPECS}

TEXT_SETTINGS: dict[str, str] = {
    "test.python": "The interpreter that runs a Python project's tests (a path, absolute or relative to projectRoot, "
                   "or a command on PATH); default: the project's .venv, venv or env, else python3 on PATH.",
}
"""Settings whose value is text (a path): unset unless a settings file gives one."""

LIST_SETTINGS: dict[str, tuple[tuple[str, ...], str]] = {
    "symbols.debugDirectories": (
        ("/usr/lib/debug",),
        "Global debug directories searched for a stripped binary's separate debug file: by build id "
        "(<dir>/.build-id/xx/yyyy.debug) and by its .gnu_debuglink name under <dir>/<the binary's directory>.",
    ),
}
"""Settings whose value is a list of absolute paths: (default, description)."""


@dataclass(frozen=True)
class Settings:
    values: dict[str, int]
    warnings: tuple[str, ...] = field(default=())
    texts: dict[str, str] = field(default_factory=dict)
    lists: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def debug_directories(self) -> tuple[str, ...]:
        return self.lists.get("symbols.debugDirectories", LIST_SETTINGS["symbols.debugDirectories"][0])

    @property
    def test_python(self) -> str | None:
        return self.texts.get("test.python")

    @property
    def max_events_per_session(self) -> int:
        return self.values["events.maxPerSession"]

    @property
    def max_output_per_session(self) -> int:
        return self.values["events.maxOutputPerSession"]

    @property
    def storage_max_bytes(self) -> int:
        return self.values["storage.maxBytes"]

    @property
    def test_status_retry_ms(self) -> int:
        return self.values["test.statusRetryMs"]

    @property
    def hot_calls_per_second(self) -> int:
        return self.values["trace.hotCallsPerSecond"]

    @property
    def sample_every(self) -> int:
        """Record one call in this many while sampling."""
        return max(1, round(100 / self.values["trace.samplePercent"]))

    @property
    def fast_path(self) -> bool:
        return self.values["trace.fastPath"] == 1

    @property
    def idle_timeout_ms(self) -> int:
        return self.values["daemon.idleTimeoutMs"]

    @property
    def max_event_bytes(self) -> int:
        return self.values["query.maxEventBytes"]


def _read_layer(path: Path, values: dict[str, int], warnings: list[str], texts: dict[str, str],
                lists: dict[str, tuple[str, ...]] | None = None) -> None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return
    except OSError as exc:
        warnings.append(f"{path}: cannot be read ({exc.strerror}); using defaults for its keys.")
        return
    except UnicodeDecodeError:
        warnings.append(f"{path}: not UTF-8 text; file ignored.")
        return
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        warnings.append(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}); file ignored.")
        return
    if not isinstance(data, dict):
        warnings.append(f"{path}: expected a JSON object of settings; file ignored.")
        return
    for key, raw in data.items():
        if key in TEXT_SETTINGS:
            if isinstance(raw, str) and raw.strip():
                texts[key] = raw.strip()
            else:
                warnings.append(f"{path}: '{key}' = {json.dumps(raw)} is invalid (a non-empty string); ignored.")
            continue
        if key in LIST_SETTINGS:
            if isinstance(raw, list) and all(isinstance(item, str) and item.startswith("/") for item in raw):
                if lists is not None:
                    lists[key] = tuple(raw)
            else:
                warnings.append(f"{path}: '{key}' = {json.dumps(raw)} is invalid (a list of absolute paths); using "
                                f"{json.dumps(list(LIST_SETTINGS[key][0]))}.")
            continue
        spec = _SPECS_BY_KEY.get(key)
        if spec is None:
            known = ", ".join([*_SPECS_BY_KEY, *TEXT_SETTINGS, *LIST_SETTINGS])
            warnings.append(f"{path}: unknown setting '{key}' ignored (known: {known}).")
            continue
        is_number = isinstance(raw, int | float) and not isinstance(raw, bool) and math.isfinite(raw)
        if not is_number or raw != int(raw) or not spec.minimum <= int(raw) <= spec.maximum:
            warnings.append(
                f"{path}: '{key}' = {json.dumps(raw)} is invalid (an integer from {spec.minimum:,} to "
                f"{spec.maximum:,}); using {values[key]:,}."
            )
            continue
        values[key] = int(raw)


def load_settings(paths: StrobePaths, project_root: str | Path | None = None) -> Settings:
    """Resolve the settings for one call, most specific file last."""
    values = {spec.key: spec.default for spec in SETTING_SPECS}
    warnings: list[str] = []
    texts: dict[str, str] = {}
    lists: dict[str, tuple[str, ...]] = {}
    _read_layer(paths.settings_file, values, warnings, texts, lists)
    if project_root is not None:
        _read_layer(Path(project_root) / ".strobe" / "settings.json", values, warnings, texts, lists)
    return Settings(values, tuple(warnings), texts, lists)


class SettingsSource:
    """The one place settings are resolved: the daemon's tool handlers, sessions and idle timer ask it."""

    def __init__(self, paths: StrobePaths) -> None:
        self._paths = paths

    def for_project(self, project_root: str | Path | None = None) -> Settings:
        """The settings in force for a project (None: the global file and defaults only)."""
        return load_settings(self._paths, project_root)
