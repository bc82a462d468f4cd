"""Human-readable session ids: `{binary}-{YYYY-MM-DD}-{HHhMM}`; the store appends -2, -3 on collision."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def session_base_id(binary_path: str, now: datetime) -> str:
    name = _UNSAFE.sub("_", Path(binary_path).name).strip("_") or "program"
    return f"{name}-{now:%Y-%m-%d}-{now:%H}h{now:%M}"
