"""Every tool and every setting is documented."""

from __future__ import annotations

import re
from pathlib import Path

from strobe.errors import ErrorCode
from strobe.mcp.app import TOOLS
from strobe.settings import SETTING_SPECS

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_every_tool_has_a_section() -> None:
    text = (DOCS / "tools.md").read_text()
    for name in TOOLS:
        assert f"## {name}\n" in text, name


def test_every_setting_is_documented_with_its_default() -> None:
    text = (DOCS / "settings.md").read_text()
    for spec in SETTING_SPECS:
        assert f"`{spec.key}` | {spec.default:,} |" in text, spec.key


def test_every_error_code_is_documented() -> None:
    text = (DOCS / "tools.md").read_text()
    for code in ErrorCode:
        assert f"`{code.value}`" in text, code


def test_architecture_names_only_modules_that_exist() -> None:
    """docs/architecture.md: module paths are relative to src/strobe/ unless they start with agent/, tests/ or docs/."""
    root = DOCS.parent
    text = (DOCS / "architecture.md").read_text()
    named = set(re.findall(r"`([\w./<>-]+(?:\.py|\.ts|\.c|\.md|/))`", text))
    assert len(named) > 20
    missing = []
    for name in sorted(named):
        if "<" in name:
            continue
        base = root if name.split("/")[0] in ("agent", "tests", "docs", "src") else root / "src" / "strobe"
        if not (base / name).exists():
            missing.append(name)
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"
