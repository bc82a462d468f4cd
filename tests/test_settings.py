"""load_settings: defaults < $STROBE_HOME/settings.json < <projectRoot>/.strobe/settings.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from strobe.paths import StrobePaths
from strobe.settings import SETTING_SPECS, Settings, load_settings

DEFAULTS = {spec.key: spec.default for spec in SETTING_SPECS}


@pytest.fixture
def paths(tmp_path: Path) -> StrobePaths:
    home = tmp_path / "home"
    home.mkdir()
    return StrobePaths(home=home)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / ".strobe").mkdir(parents=True)
    return root


def write_global(paths: StrobePaths, content: Any) -> Path:
    text = content if isinstance(content, str) else json.dumps(content)
    paths.settings_file.write_text(text, encoding="utf-8")
    return paths.settings_file


def write_project(project: Path, content: Any) -> Path:
    path = project / ".strobe" / "settings.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


def test_defaults_without_files(paths: StrobePaths, project: Path) -> None:
    settings = load_settings(paths, project)
    assert settings == Settings(DEFAULTS, ())
    assert settings.max_events_per_session == 200_000
    assert settings.test_status_retry_ms == 5_000
    assert settings.idle_timeout_ms == 30 * 60 * 1000


def test_defaults_without_project(paths: StrobePaths) -> None:
    assert load_settings(paths) == Settings(DEFAULTS, ())


def test_defaults_when_home_does_not_exist(tmp_path: Path) -> None:
    assert load_settings(StrobePaths(home=tmp_path / "missing"), tmp_path / "nowhere") == Settings(
        DEFAULTS, ()
    )


def test_global_file_overrides_default(paths: StrobePaths, project: Path) -> None:
    write_global(paths, {"events.maxPerSession": 1234, "daemon.idleTimeoutMs": 60_000})
    settings = load_settings(paths, project)
    assert settings.warnings == ()
    assert settings.max_events_per_session == 1234
    assert settings.idle_timeout_ms == 60_000
    assert settings.test_status_retry_ms == 5_000


def test_project_file_overrides_global(paths: StrobePaths, project: Path) -> None:
    write_global(paths, {"events.maxPerSession": 1234, "test.statusRetryMs": 700})
    write_project(project, {"events.maxPerSession": 99})
    settings = load_settings(paths, project)
    assert settings.warnings == ()
    assert settings.max_events_per_session == 99
    assert settings.test_status_retry_ms == 700  # from the global file
    # Without the project, only the global file applies.
    assert load_settings(paths).max_events_per_session == 1234


def test_project_root_as_string(paths: StrobePaths, project: Path) -> None:
    write_project(project, {"events.maxPerSession": 42})
    assert load_settings(paths, str(project)).max_events_per_session == 42


def test_invalid_json_warns_and_uses_defaults(paths: StrobePaths, project: Path) -> None:
    path = write_global(paths, '{"events.maxPerSession": 5,')
    settings = load_settings(paths, project)
    assert settings.values == DEFAULTS
    assert len(settings.warnings) == 1
    assert str(path) in settings.warnings[0]
    assert "not valid JSON" in settings.warnings[0]
    assert "line 1" in settings.warnings[0]


def test_invalid_project_json_keeps_global_values(paths: StrobePaths, project: Path) -> None:
    write_global(paths, {"events.maxPerSession": 1234})
    path = write_project(project, "not json")
    settings = load_settings(paths, project)
    assert settings.max_events_per_session == 1234
    assert len(settings.warnings) == 1 and str(path) in settings.warnings[0]


@pytest.mark.parametrize("content", [[1, 2], "5", '"text"', "null", "true"])
def test_non_object_json(paths: StrobePaths, content: Any) -> None:
    path = write_global(paths, content)
    settings = load_settings(paths)
    assert settings.values == DEFAULTS
    assert settings.warnings == (f"{path}: expected a JSON object of settings; file ignored.",)


def test_unknown_key_warns_and_known_keys_still_apply(paths: StrobePaths, project: Path) -> None:
    path = write_project(project, {"events.maxPerSesion": 10, "test.statusRetryMs": 900})
    settings = load_settings(paths, project)
    assert settings.test_status_retry_ms == 900
    assert settings.max_events_per_session == 200_000
    assert len(settings.warnings) == 1
    warning = settings.warnings[0]
    assert str(path) in warning
    assert "unknown setting 'events.maxPerSesion'" in warning
    assert "events.maxPerSession" in warning.split("known:")[1]  # lists the valid keys


@pytest.mark.parametrize(
    ("key", "value", "shown", "range_text"),
    [
        ("events.maxPerSession", 0, "0", "from 1 to 10,000,000"),
        ("events.maxPerSession", 10_000_001, "10000001", "from 1 to 10,000,000"),
        ("events.maxPerSession", -5, "-5", "from 1 to 10,000,000"),
        ("events.maxPerSession", "100", '"100"', "from 1 to 10,000,000"),
        ("events.maxPerSession", True, "true", "from 1 to 10,000,000"),
        ("events.maxPerSession", 1.5, "1.5", "from 1 to 10,000,000"),
        ("events.maxPerSession", None, "null", "from 1 to 10,000,000"),
        ("events.maxPerSession", [5], "[5]", "from 1 to 10,000,000"),
        ("test.statusRetryMs", 499, "499", "from 500 to 60,000"),
        ("test.statusRetryMs", 60_001, "60001", "from 500 to 60,000"),
        ("daemon.idleTimeoutMs", 99, "99", "from 100 to 604,800,000"),
    ],
)
def test_bad_value_falls_back_with_warning(
    paths: StrobePaths, key: str, value: Any, shown: str, range_text: str
) -> None:
    path = write_global(paths, {key: value})
    settings = load_settings(paths)
    assert settings.values == DEFAULTS
    assert len(settings.warnings) == 1
    warning = settings.warnings[0]
    assert warning.startswith(f"{path}: '{key}' = {shown} is invalid")
    assert range_text in warning
    assert f"using {DEFAULTS[key]:,}" in warning


def test_bad_project_value_falls_back_to_global_value(paths: StrobePaths, project: Path) -> None:
    write_global(paths, {"events.maxPerSession": 1234})
    write_project(project, {"events.maxPerSession": 0})
    settings = load_settings(paths, project)
    assert settings.max_events_per_session == 1234
    assert len(settings.warnings) == 1
    assert "using 1,234" in settings.warnings[0]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("events.maxPerSession", 1),
        ("events.maxPerSession", 10_000_000),
        ("test.statusRetryMs", 500),
        ("test.statusRetryMs", 60_000),
    ],
)
def test_range_bounds_are_inclusive(paths: StrobePaths, key: str, value: int) -> None:
    write_global(paths, {key: value})
    settings = load_settings(paths)
    assert settings.warnings == ()
    assert settings.values[key] == value


def test_warnings_from_both_files_in_order(paths: StrobePaths, project: Path) -> None:
    global_path = write_global(paths, {"nope": 1})
    project_path = write_project(project, {"alsonope": 1})
    warnings = load_settings(paths, project).warnings
    assert len(warnings) == 2
    assert warnings[0].startswith(f"{global_path}:") and "'nope'" in warnings[0]
    assert warnings[1].startswith(f"{project_path}:") and "'alsonope'" in warnings[1]


def test_unreadable_file_warns(paths: StrobePaths) -> None:
    paths.settings_file.mkdir()  # a directory where the file should be
    settings = load_settings(paths)
    assert settings.values == DEFAULTS
    assert len(settings.warnings) == 1
    assert str(paths.settings_file) in settings.warnings[0] and "cannot be read" in settings.warnings[0]


def test_files_are_reread_on_every_call(paths: StrobePaths, project: Path) -> None:
    assert load_settings(paths, project).max_events_per_session == 200_000
    write_global(paths, {"events.maxPerSession": 10})
    assert load_settings(paths, project).max_events_per_session == 10
    write_project(project, {"events.maxPerSession": 20})
    assert load_settings(paths, project).max_events_per_session == 20
    write_project(project, "{broken")
    settings = load_settings(paths, project)
    assert settings.max_events_per_session == 10 and len(settings.warnings) == 1
    (project / ".strobe" / "settings.json").unlink()
    paths.settings_file.unlink()
    assert load_settings(paths, project) == Settings(DEFAULTS, ())


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_number_falls_back_with_warning(paths: StrobePaths, literal: str) -> None:
    path = write_global(paths, f'{{"events.maxPerSession": {literal}}}')
    settings = load_settings(paths)
    assert settings.values == DEFAULTS
    assert len(settings.warnings) == 1 and str(path) in settings.warnings[0]


def test_non_utf8_file_warns(paths: StrobePaths) -> None:
    paths.settings_file.write_bytes(b'{"events.maxPerSession": 5}\xff\xfe')
    settings = load_settings(paths)
    assert settings.values == DEFAULTS
    assert len(settings.warnings) == 1 and str(paths.settings_file) in settings.warnings[0]


def test_text_setting_for_the_test_interpreter(paths: StrobePaths, project: Path) -> None:
    assert load_settings(paths, project).test_python is None
    write_global(paths, {"test.python": "/usr/bin/python3"})
    assert load_settings(paths, project).test_python == "/usr/bin/python3"
    write_project(project, {"test.python": " .venv-test/bin/python "})
    assert load_settings(paths, project).test_python == ".venv-test/bin/python"
    path = write_project(project, {"test.python": 3})
    settings = load_settings(paths, project)
    assert settings.test_python == "/usr/bin/python3"
    assert settings.warnings == (f"{path}: 'test.python' = 3 is invalid (a non-empty string); ignored.",)
