"""Every tool and every setting is documented."""

from __future__ import annotations

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
