"""How a message shows a value it received: strings quoted, everything else as JSON, and a long value
cut to its start with its length, so a 1 MB name gives a line a person can read (issue 52)."""

from __future__ import annotations

import json
from typing import Any

LIMIT = 256  # characters of a value kept in a message: an Azure resource id (about 200) is shown whole


def shown(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else json.dumps(value, default=str)
    if len(text) <= LIMIT + 40:
        return text
    size = f"{len(value):,} characters" if isinstance(value, str) else f"{len(text):,} characters as JSON"
    return f"{text[:LIMIT]}... ({size})"
