"""A repository script that a render embeds whole (the launcher in its ConfigMap) is written as a
reference to the file with its sha256, not as its text: the golden render then says which script
the ConfigMap carries, changes by one line when the script changes, and the script is reviewed as
itself. The stack deploys the text; only the offline render abbreviates it."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "scripts"


def reference(path: Path) -> str:
    data = path.read_bytes()
    return (f"# not embedded here: the text of {path.relative_to(REPO)} ({len(data)} bytes, "
            f"sha256 {hashlib.sha256(data).hexdigest()})\n")


def referenced(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` (a manifest) with each ConfigMap data value that is a script's text replaced by its
    reference."""
    data = obj.get("data")
    if obj.get("kind") != "ConfigMap" or not isinstance(data, dict):
        return obj
    scripts = {p.read_text(): p for p in sorted(SCRIPTS.glob("*.sh"))}
    return {**obj, "data": {k: reference(scripts[v]) if v in scripts else v for k, v in data.items()}}
